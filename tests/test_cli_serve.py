"""`spanjudge serve` through the `spanjudge` command: its own logging flags, `-v` anywhere, one
start-up line saying where it listens and where verdicts go, nothing left behind by a failed start.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.slow

CLI = [sys.executable, "-m", "spanjudge.cli"]


def _config(tmp_path: Path, **serve: Any) -> Path:
    section = {
        "grpc_endpoint": "127.0.0.1:0",
        "http_endpoint": "127.0.0.1:0",
        "metrics_endpoint": "127.0.0.1:0",
        "spool": {"path": str(tmp_path / "spool.db")},
        "shutdown_timeout_s": 5,
        **serve,
    }
    path = tmp_path / "serve.yaml"
    path.write_text(yaml.safe_dump({"serve": section}))
    return path


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_EXPORTER_OTLP")}
    env.update(extra)
    return env


class Running:
    def __init__(self, proc: subprocess.Popen[str], ready: Path) -> None:
        self.proc = proc
        self.ready = ready

    def endpoints(self) -> dict[str, Any]:
        import json

        deadline = time.monotonic() + 60
        while not self.ready.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"serve did not start: {self.stop()[1]}")
            time.sleep(0.1)
        endpoints: dict[str, Any] = json.loads(self.ready.read_text())
        return endpoints

    def stop(self) -> tuple[int, str]:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        _, err = self.proc.communicate(timeout=60)
        return self.proc.returncode, err


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Any]:
    started: list[Running] = []

    def start(*argv: str, env: dict[str, str] | None = None) -> Running:
        ready = tmp_path / f"ready{len(started)}.json"
        proc = subprocess.Popen(
            [*CLI, *argv, "--ready-file", str(ready)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env or _env(),
            cwd=tmp_path,
        )
        running = Running(proc, ready)
        started.append(running)
        return running

    yield start
    for running in started:
        if running.proc.poll() is None:
            running.proc.kill()
            running.proc.communicate()


def test_healthy_server_says_where_it_listens_and_where_verdicts_go(tmp_path, serve):  # type: ignore[no-untyped-def]
    with socket.socket() as sink:  # a verdict endpoint that exists, though nothing reads it
        sink.bind(("127.0.0.1", 0))
        port = sink.getsockname()[1]
        env = _env(OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}")
        running = serve("serve", "--config", str(_config(tmp_path)), env=env)
        at = running.endpoints()
        code, err = running.stop()
    assert code == 0, err
    [line] = [x for x in err.splitlines() if "listening" in x]
    assert " INFO " in line
    assert f"OTLP/gRPC {at['grpc']}" in line and f"http://{at['http']}/v1/traces" in line
    assert f"metrics http://{at['metrics']}/metrics" in line
    assert f"spool {tmp_path / 'spool.db'}" in line
    assert f"verdicts to OTLP grpc http://127.0.0.1:{port}" in line


def test_without_an_export_endpoint_the_line_is_a_warning_that_export_is_off(tmp_path, serve):  # type: ignore[no-untyped-def]
    running = serve("serve", "--config", str(_config(tmp_path)))
    running.endpoints()
    code, err = running.stop()
    assert code == 0
    [line] = [x for x in err.splitlines() if "listening" in x]
    assert " WARNING " in line and "verdict export is OFF" in line
    assert "OTEL_EXPORTER_OTLP_ENDPOINT" in line


def test_log_level_is_the_servers_own(tmp_path, serve):  # type: ignore[no-untyped-def]
    quiet = serve("serve", "--config", str(_config(tmp_path)), "--log-level", "ERROR")
    quiet.endpoints()
    code, err = quiet.stop()
    assert code == 0 and "listening" not in err and "shutting down" not in err
    loud = serve("serve", "--config", str(_config(tmp_path)), "--log-level", "debug")
    at = loud.endpoints()
    with urllib.request.urlopen(f"http://{at['http']}/healthz", timeout=10) as answer:
        assert answer.status == 200
    code, err = loud.stop()
    assert code == 0 and "GET /healthz" in err and "shutting down" in err


@pytest.mark.parametrize("where", ["before", "after"])
def test_verbose_before_or_after_serve_combines_with_its_flags(tmp_path, serve, where):  # type: ignore[no-untyped-def]
    config = str(_config(tmp_path))
    argv = ["serve", "--config", config, "-v"]
    if where == "before":
        argv = ["-v", *argv[:-1]]
    running = serve(*argv)
    at = running.endpoints()
    with urllib.request.urlopen(f"http://{at['http']}/healthz", timeout=10) as answer:
        assert answer.status == 200
    code, err = running.stop()
    assert code == 0, err
    assert "GET /healthz" in err  # the HTTP receiver's request log is DEBUG


def test_failed_start_leaves_no_spool_behind(tmp_path):  # type: ignore[no-untyped-def]
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        config = tmp_path / "serve.yaml"
        # No spool path: the default, ./spanjudge-spool.db, in the working directory.
        config.write_text(
            yaml.safe_dump(
                {
                    "serve": {
                        "grpc_endpoint": "127.0.0.1:0",
                        "http_endpoint": "127.0.0.1:0",
                        "metrics_endpoint": f"127.0.0.1:{port}",
                    }
                }
            )
        )
        done = subprocess.run(
            [*CLI, "serve", "--config", str(config)],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path,
            env=_env(),
        )
    assert done.returncode == 2, done.stderr
    assert f"serve.metrics_endpoint 127.0.0.1:{port}: address already in use" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["serve.yaml"]


@pytest.mark.parametrize(
    "tls",
    [{"ca_file": "ca.pem"}, {"cert_file": "client.pem", "key_file": "client.key"}],
    ids=["ca_file", "client_cert"],
)
def test_a_missing_export_tls_file_is_a_configuration_error_that_leaves_nothing(tmp_path, tls):  # type: ignore[no-untyped-def]
    # The Collector-style `tls:` block of serve.export, naming a file that is not there.
    config = tmp_path / "serve.yaml"
    export = {"endpoint": "https://127.0.0.1:14317", "tls": tls}
    serve = {f"{n}_endpoint": "127.0.0.1:0" for n in ("grpc", "http", "metrics")}
    config.write_text(yaml.safe_dump({"serve": {**serve, "export": export}}))
    done = subprocess.run(
        [*CLI, "serve", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env=_env(),
    )
    assert done.returncode == 2, done.stderr
    for key, file in tls.items():  # named as resolved: relative to the configuration's directory
        assert f"serve.export.tls.{key}: no such file {str(tmp_path / file)!r}" in done.stderr, (
            done.stderr
        )
    assert "Errno" not in done.stderr and "Traceback" not in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["serve.yaml"]


def test_unknown_serve_flag_shows_serves_usage(tmp_path):  # type: ignore[no-untyped-def]
    done = subprocess.run(
        [*CLI, "serve", "--no-such-flag"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert done.stderr.startswith("usage: spanjudge serve")
    assert "--no-such-flag" in done.stderr


def test_a_log_level_that_is_none_is_a_usage_error(tmp_path):  # type: ignore[no-untyped-def]
    """`--log-level verbose` started a server logging at INFO without a word; a lower-case
    level is still a level."""
    done = subprocess.run(
        [*CLI, "serve", "--config", str(_config(tmp_path)), "--log-level", "verbose"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("usage: spanjudge serve")
    assert "--log-level: invalid choice: 'VERBOSE'" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["serve.yaml"]  # nothing started


def test_a_lower_case_log_level_is_taken(tmp_path, serve):  # type: ignore[no-untyped-def]
    running = serve("serve", "--config", str(_config(tmp_path)), "--log-level", "warning")
    running.endpoints()
    code, err = running.stop()
    assert code == 0
    assert "listening: " in err and "shutting down" not in err  # the INFO line is below WARNING
