"""`configure_opentelemetry` behind an OTLP endpoint nobody listens on: the agent script (the
shipped example, a real process) says so in one line naming the endpoint and the cause, shows none
of the SDK exporters' per-retry lines, and exits within a few seconds instead of waiting for every
retry (~16 s before)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

from tests.conftest import ROOT

_SDK_LINES = ("Transient error", "Failed to export", "retrying in", "Exporter already shutdown")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when the block ends: nothing listens


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_an_unreachable_endpoint_is_one_line_and_a_bounded_exit(protocol: str) -> None:
    port = _closed_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "SPANJUDGE_"))}
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{port}"
    env["OTEL_EXPORTER_OTLP_PROTOCOL"] = protocol
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "plain_otel_agent.py")],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    took = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("agent: The grand total is 2500.")
    lines = done.stderr.splitlines()
    assert not [line for line in lines if line.startswith(_SDK_LINES)], done.stderr
    [line] = lines  # one line, naming the endpoint, the cause, and what it means for verdicts
    assert f"127.0.0.1:{port}" in line and protocol in line, line
    assert "verdicts" in line and "lost" in line, line
    assert "refused" in line.lower() or "connect" in line.lower(), line
    assert took < 12, f"{took:.1f} s"  # the export bound is 5 s; the SDK alone waited ~16 s


_OWN_EXPORTER_SCRIPT = """
import logging, sys
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from spanjudge import configure_opentelemetry

logging.basicConfig(stream=sys.stderr, format="%(name)s: %(message)s")
otel = configure_opentelemetry()  # spanjudge's exporters: their retry lines give way to one line
mine = TracerProvider()  # the application's own provider and exporter, to another endpoint
mine.add_span_processor(
    SimpleSpanProcessor(OTLPSpanExporter(endpoint="http://127.0.0.1:{mine}", timeout=2))
)
mine.get_tracer("app").start_span("app work").end()
mine.shutdown()
otel.shutdown()
"""


def test_the_applications_own_exporter_keeps_its_retry_lines() -> None:
    """Only the exporters `configure_opentelemetry` built have their lines replaced: before, the
    filter on the SDK's loggers dropped every exporter's retry lines in the process, so an
    application's own exporter behind a dead endpoint failed without a word."""
    ours, mine = _closed_port(), _closed_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "SPANJUDGE_"))}
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{ours}"
    done = subprocess.run(
        [sys.executable, "-c", _OWN_EXPORTER_SCRIPT.format(mine=mine)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    sdk = [line for line in lines if "Transient error" in line or "Failed to export" in line]
    assert sdk, done.stderr  # the application's exporter still says it cannot export
    assert all(f"127.0.0.1:{mine}" in line for line in sdk if "Transient" in line), done.stderr
    assert not [line for line in sdk if f":{ours}" in line], done.stderr  # spanjudge's: replaced
    [ours_line] = [line for line in lines if line.startswith("spanjudge")]
    assert f"127.0.0.1:{ours}" in ours_line and "lost" in ours_line, done.stderr
