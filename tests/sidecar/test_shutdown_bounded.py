"""Every part of a shutdown is bounded by `serve.shutdown_timeout_s`: what does not finish in
time is said in the log and left to the spool, never waited for."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from tests.conftest import fake_distribution
from tests.sidecar.helpers import SidecarProcess, VerdictServer, synthetic_session, wait_for
from tests.sidecar.workers_helpers import (
    _config,
    _env,
    _Held,
    _sidecar,
    _stop,
    _stop_ends_at_the_deadline,
)

pytestmark = pytest.mark.slow


def test_an_evaluation_stuck_at_the_shutdown_of_one_process_ends_at_the_deadline(
    tmp_path: Path, verdicts: VerdictServer, caplog: pytest.LogCaptureFixture
) -> None:
    """`workers: 1`, `on_shutdown: evaluate`: the open sessions are evaluated at the shutdown,
    and one evaluator hangs there; the shutdown still ends at its deadline (the evaluator would
    hold it 30 s), the session stays spooled for the next start, and the log says so."""
    held = _Held("held")
    sessions = {"idle_timeout_s": 300.0, "end_grace_s": 300.0}  # open until the shutdown
    sidecar = _sidecar(
        tmp_path, held, verdicts, sessions, on_shutdown="evaluate", shutdown_timeout_s=3
    )
    assert sidecar.grpc is not None
    exporter = OTLPSpanExporter(endpoint=f"127.0.0.1:{sidecar.grpc.port}", insecure=True)
    assert exporter.export(synthetic_session("open", end=False)) == SpanExportResult.SUCCESS
    exporter.shutdown()
    assert wait_for(lambda: sidecar.worker.pending_spans == 0, 10)
    _stop_ends_at_the_deadline(
        sidecar, held, verdicts, caplog, "open", "worker did not stop in time"
    )


PLUGIN = """
import os
import threading


def poll():
    threading.Event().wait()


class Stuck:
    def __init__(self):
        if os.environ.get("STUCK") == "thread":  # a thread the interpreter's exit waits for
            threading.Thread(target=poll, name="plugin-poller").start()

    def emit(self, result):
        pass

    def flush(self, timeout_s):
        return True

    def shutdown(self):
        if os.environ.get("STUCK") == "shutdown":
            threading.Event().wait()


def sink(options, path, problems):
    return Stuck()
"""


@pytest.mark.parametrize(
    ("stuck", "where"),
    [
        ("shutdown", "stuck shutting down the sinks"),
        ("thread", "stuck in the interpreter's exit (threads still running: plugin-poller)"),
    ],
)
def test_serve_ends_at_its_shutdown_timeout_whatever_hangs(
    tmp_path: Path, verdicts: VerdictServer, stuck: str, where: str
) -> None:
    """A plugin sink that never returns from `shutdown`, or leaves a thread running that the
    interpreter's exit waits for: serve exits (status 0) a second after `shutdown_timeout`, the
    session judged before the stop is exported, and the log says where it was stuck, with the
    stacks."""
    site = fake_distribution(
        tmp_path / "site",
        "stuck-sink",
        {"spanjudge.sinks": {"stuck": "stuck_sink:sink"}},
        {"stuck_sink": PLUGIN},
    )
    config = _config(tmp_path, 1, shutdown_timeout_s=3)
    config["emit"] = {"sinks": {"stuck": {}}}
    env = {
        **_env(verdicts),
        "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
        "STUCK": stuck,
    }
    sidecar = SidecarProcess(tmp_path, config, env).start()
    try:
        exporter = OTLPSpanExporter(endpoint=sidecar.endpoints["grpc"], insecure=True)
        assert exporter.export(synthetic_session("ended")) == SpanExportResult.SUCCESS
        exporter.shutdown()
        assert wait_for(lambda: "ended" in verdicts.received.sessions(), 20)
        started = time.monotonic()
        assert sidecar.terminate(timeout_s=20) == 0
        assert time.monotonic() - started < 8
        log = sidecar.log.read_text()
        assert "shutdown: not finished 4s after it began (serve.shutdown_timeout 3s)" in log, log
        assert where in log, log
        assert "stuck_sink.py" in log  # the stack of the part that hangs
    finally:
        _stop(sidecar)
