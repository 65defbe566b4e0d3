"""Real parts for the Collector tests: the Collector that scripts/build-otelcol builds, a real
Prometheus (remote-write receiver on, the shipped alert rules loaded), free loopback ports and
the OTLP JSON lines a `file` exporter writes."""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import unavailable

ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = ROOT / "scripts" / "build-otelcol"
CONFIG_DIR = ROOT / "collector-config"
RULES = CONFIG_DIR / "prometheus" / "spanjudge-alerts.yaml"
# Set by .ci/run from the last line of scripts/build-otelcol.
BINARY_ENV = "SPANJUDGE_OTELCOL"
READY = b"Everything is ready"


@functools.cache
def _find_binary() -> tuple[str | None, str]:
    path = os.environ.get(BINARY_ENV)
    if path:
        if os.access(path, os.X_OK):
            return path, ""
        return None, f"{BINARY_ENV}={path} is not an executable file"
    # Only a binary that is already built: a test must not start a cold build of minutes.
    found = subprocess.run(
        [str(BUILD_SCRIPT), "--cached"], capture_output=True, text=True, check=False, timeout=60
    )
    lines = found.stdout.strip().splitlines()
    if found.returncode == 0 and lines and os.access(lines[-1], os.X_OK):
        return lines[-1], ""
    said = found.stderr.strip().splitlines()
    detail = f": {said[-1]}" if said else ""  # e.g. "'go' is not on PATH": no hash, no cache
    return None, (
        f"the Collector is not built (run scripts/build-otelcol, or set {BINARY_ENV}){detail}"
    )


def otelcol_binary() -> str:
    """The Collector binary, or skip (fail where CI requires `otelcol`)."""
    path, why = _find_binary()
    if path is None:
        unavailable("otelcol", why)
    assert path is not None
    return path


def free_port() -> int:
    """A loopback port nobody listens on now (the Collector does not take port 0)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(predicate: Any, timeout_s: float = 30.0, interval_s: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval_s)
    return bool(predicate())


def validate(
    config: Path, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`otelcol validate --config FILE` (resolves env vars, builds every component's config)."""
    return subprocess.run(
        [otelcol_binary(), "validate", f"--config={config}"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


class Collector:
    """One Collector process with a config file and environment; its log goes to a file."""

    def __init__(self, directory: Path, config: Path, env: Mapping[str, str] | None = None):
        directory.mkdir(parents=True, exist_ok=True)
        self.config = config
        self.env = {**os.environ, **(env or {})}
        self.log_path = directory / "otelcol.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 60.0) -> Collector:
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [otelcol_binary(), f"--config={self.config}"],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
            )
        proc = self.proc

        def ready() -> bool:
            if proc.poll() is not None:
                return True
            return READY in self.log_path.read_bytes()[offset:]

        assert wait_for(ready, timeout_s), f"Collector not ready:\n{self.log()}"
        assert proc.poll() is None, f"Collector exited {proc.returncode}:\n{self.log()}"
        return self

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")[-6000:]

    def stop(self, timeout_s: float = 30.0) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(10)


def write_yaml(path: Path, doc: Any) -> Path:
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def backend_config(directory: Path) -> tuple[Path, dict[str, str]]:
    """A second real Collector standing in for Tempo and Loki: it writes what it receives to
    `file` exporters. Returns its config and the env that points sidecar.yaml at it."""
    directory.mkdir(parents=True, exist_ok=True)
    tempo, loki = free_port(), free_port()
    config = {
        "receivers": {
            "otlp": {
                "protocols": {
                    "grpc": {"endpoint": f"127.0.0.1:{tempo}"},
                    # Loki's OTLP endpoint is <base>/otlp/v1/logs
                    "http": {"endpoint": f"127.0.0.1:{loki}", "logs_url_path": "/otlp/v1/logs"},
                }
            }
        },
        "exporters": {
            "file/traces": {"path": str(directory / "traces.jsonl"), "flush_interval": "100ms"},
            "file/logs": {"path": str(directory / "logs.jsonl"), "flush_interval": "100ms"},
        },
        "service": {
            "pipelines": {
                "traces": {"receivers": ["otlp"], "exporters": ["file/traces"]},
                "logs": {"receivers": ["otlp"], "exporters": ["file/logs"]},
            },
            "telemetry": {"metrics": {"level": "none"}},
        },
    }
    path = write_yaml(directory / "backend.yaml", config)
    env = {
        "TEMPO_OTLP_GRPC_ENDPOINT": f"127.0.0.1:{tempo}",
        "LOKI_OTLP_ENDPOINT": f"http://127.0.0.1:{loki}/otlp",
    }
    return path, env


def loopback_env() -> dict[str, str]:
    """Every listening address of the shipped configs on a free loopback port."""
    return {
        "AGENTS_OTLP_GRPC_ENDPOINT": f"127.0.0.1:{free_port()}",
        "AGENTS_OTLP_HTTP_ENDPOINT": f"127.0.0.1:{free_port()}",
        "VERDICTS_OTLP_GRPC_ENDPOINT": f"127.0.0.1:{free_port()}",
        "VERDICTS_OTLP_HTTP_ENDPOINT": f"127.0.0.1:{free_port()}",
        "PROMETHEUS_EXPORTER_ENDPOINT": f"127.0.0.1:{free_port()}",
        "OTELCOL_TELEMETRY_HOST": "127.0.0.1",
        "OTELCOL_TELEMETRY_PORT": str(free_port()),
    }


def verdicts_env(env: dict[str, str]) -> dict[str, str]:
    """serve's environment as collector-config/README.md says: verdicts back to the Collector's
    verdict receiver (``env`` from `loopback_env`), not to 4317."""
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://{env['VERDICTS_OTLP_GRPC_ENDPOINT']}",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
        "OTEL_EXPORTER_OTLP_INSECURE": "true",
    }


def file_records(path: Path, kind: str) -> Iterator[dict[str, Any]]:
    """Spans (kind "spans") or log records ("logs") from a `file` exporter's OTLP JSON lines,
    each with its attributes decoded into `attrs`."""
    if not path.exists():
        return
    outer, inner, items = {
        "spans": ("resourceSpans", "scopeSpans", "spans"),
        "logs": ("resourceLogs", "scopeLogs", "logRecords"),
    }[kind]
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        for resource in json.loads(line).get(outer, []):
            for scope in resource.get(inner, []):
                for item in scope.get(items, []):
                    yield {**item, "attrs": _attrs(item.get("attributes", []))}


def _attrs(pairs: list[dict[str, Any]]) -> dict[str, Any]:
    out = {}
    for pair in pairs:
        value = pair.get("value", {})
        out[pair["key"]] = next(iter(value.values()), None) if value else None
    return out


class Prometheus:
    """A real Prometheus on loopback: remote-write receiver on, the shipped alert rules loaded
    (evaluated every 5 s)."""

    def __init__(self, directory: Path, scrape: list[str] | None = None) -> None:
        binary = shutil.which("prometheus")
        if binary is None:
            unavailable("prometheus", "prometheus is not installed (Debian package `prometheus`)")
        assert binary is not None
        directory.mkdir(parents=True, exist_ok=True)
        # The shipped rules, every expression and `for:` as shipped; only each group's
        # evaluation interval is 5 s instead of 1 m, so a test waits seconds for the first
        # evaluation instead of up to a minute.
        rules = yaml.safe_load(RULES.read_text(encoding="utf-8"))
        for group in rules["groups"]:
            group["interval"] = "5s"
        config: dict[str, Any] = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(write_yaml(directory / RULES.name, rules))],
        }
        if scrape:
            config["scrape_configs"] = [
                {"job_name": "spanjudge", "static_configs": [{"targets": scrape}]}
            ]
        path = write_yaml(directory / "prometheus.yml", config)
        self.url = f"http://127.0.0.1:{free_port()}"
        self.log_path = directory / "prometheus.log"
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                [binary, f"--config.file={path}", f"--storage.tsdb.path={directory / 'tsdb'}",
                 f"--web.listen-address={self.url.removeprefix('http://')}",
                 "--web.enable-remote-write-receiver"],
                stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        assert wait_for(self._ready, 60), self.log_path.read_text()

    @property
    def remote_write_url(self) -> str:
        return f"{self.url}/api/v1/write"

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/-/ready", timeout=1) as answer:
                return bool(answer.status == 200)
        except OSError:
            return False

    def api(self, path: str, **params: str) -> Any:
        """`data` of a Prometheus HTTP API answer."""
        url = f"{self.url}{path}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=10) as answer:
            body = json.load(answer)
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.api("/api/v1/query", query=expr)["result"]
        return result

    def total(self, expr: str) -> float:
        return sum(float(r["value"][1]) for r in self.query(expr))

    def alerts(self) -> list[dict[str, Any]]:
        """Alerts of the loaded rules that are pending or firing now."""
        found: list[dict[str, Any]] = self.api("/api/v1/alerts")["alerts"]
        return found

    def rule_names(self) -> set[str]:
        groups = self.api("/api/v1/rules")["groups"]
        return {rule["name"] for group in groups for rule in group["rules"]}

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)
