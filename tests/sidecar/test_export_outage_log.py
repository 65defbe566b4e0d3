"""`spanjudge serve` whose verdict endpoint is down (a closed port): the user reads one line when
export starts failing, naming the endpoint and saying that nothing is lost, and one when it works
again; not the OpenTelemetry exporters' warning and error at every retry and every export."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from tests.sidecar.helpers import VerdictServer, synthetic_session, wait_for

pytestmark = pytest.mark.slow
SESSIONS = ("outage-a", "outage-b")
CLI = [sys.executable, "-m", "spanjudge.cli"]


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port  # nothing listens there now


def _serve(tmp_path: Path, port: int, protocol: str) -> tuple[subprocess.Popen[bytes], Path]:
    """`spanjudge serve` exporting verdicts to 127.0.0.1:``port``; its stderr goes to a file."""
    config = tmp_path / "serve.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "sessions": {"end_grace_s": 0.1},
                "serve": {
                    "grpc_endpoint": "127.0.0.1:0",
                    "http_endpoint": "127.0.0.1:0",
                    "metrics_endpoint": "127.0.0.1:0",
                    "spool": {"path": str(tmp_path / "spool.db")},
                    "shutdown_timeout_s": 5,
                    "export": {
                        "endpoint": f"http://127.0.0.1:{port}",
                        "protocol": protocol,
                        "tls": {"insecure": True},
                        "timeout": "3s",  # each export gives up after a retry: many in the test
                        "metrics_interval_s": 1,
                    },
                },
            }
        )
    )
    ready, log = tmp_path / "ready.json", tmp_path / "serve.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_EXPORTER_OTLP")}
    with log.open("w") as stderr:
        proc = subprocess.Popen(
            [*CLI, "serve", "--config", str(config), "--ready-file", str(ready)],
            stderr=stderr,
            env=env,
            cwd=tmp_path,
        )
    assert wait_for(ready.exists, 60), log.read_text()
    exporter = OTLPSpanExporter(endpoint=json.loads(ready.read_text())["grpc"], insecure=True)
    for session in SESSIONS:
        assert exporter.export(synthetic_session(session)) == SpanExportResult.SUCCESS
    exporter.shutdown()
    return proc, log


def _stop(proc: subprocess.Popen[bytes]) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    return proc.wait(60)


def _one_failing_line(lines: list[str], port: int) -> None:
    failing = [line for line in lines if "is failing" in line]
    assert len(failing) == 1, lines
    assert f"127.0.0.1:{port}" in failing[0] and "nothing is lost" in failing[0]
    assert " WARNING " in failing[0] and "Connection refused" in failing[0]
    assert not [line for line in lines if "opentelemetry" in line], lines
    assert len([line for line in lines if "did not confirm" in line]) <= 1, lines


def test_an_unreachable_endpoint_is_one_line_and_its_return_another(tmp_path: Path) -> None:
    port = _closed_port()
    proc, log = _serve(tmp_path, port, "grpc")
    verdicts: VerdictServer | None = None
    try:
        assert wait_for(lambda: "is failing" in log.read_text(), 60), log.read_text()
        time.sleep(6)  # several more retries of the spans, the log records and the metrics
        verdicts = VerdictServer(port=port)  # the endpoint comes back
        assert wait_for(lambda: set(SESSIONS) <= set(verdicts.received.sessions()), 90)
        assert wait_for(lambda: "works again" in log.read_text(), 30), log.read_text()
    finally:
        code = _stop(proc)
        if verdicts is not None:
            verdicts.stop()
    lines = log.read_text().splitlines()
    _one_failing_line(lines, port)
    assert len([line for line in lines if "works again" in line]) == 1, lines
    assert code == 0


def test_over_otlp_http_too_the_outage_is_one_line(tmp_path: Path) -> None:
    port = _closed_port()
    proc, log = _serve(tmp_path, port, "http/protobuf")
    try:
        assert wait_for(lambda: "is failing" in log.read_text(), 60), log.read_text()
        time.sleep(6)  # several more retries of the spans, the log records and the metrics
    finally:
        code = _stop(proc)
    _one_failing_line(log.read_text().splitlines(), port)
    assert code == 0
