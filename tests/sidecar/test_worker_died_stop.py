"""`workers: 1`: the worker thread died (a bug outside its guards; serve then exits 1 with
'stopping: the evaluation worker died'). The stop still does what a stop does: the open
sessions are evaluated (`on_shutdown: evaluate`) and their verdicts exported: the stop's finish
does not depend on the (dead) worker thread."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from tests.sidecar.helpers import VerdictServer, synthetic_session, wait_for
from tests.sidecar.workers_helpers import _Held, _sidecar, _stop_ends_at_the_deadline

pytestmark = pytest.mark.slow


def _kill_the_worker_thread(sidecar: object, exporter: OTLPSpanExporter) -> None:
    """Send "open2" through a worker whose loop then raises outside its guards."""

    def broken(*args: object, **kwargs: object) -> int:
        raise RuntimeError("a bug in the worker loop")

    worker = sidecar.worker  # type: ignore[attr-defined]
    worker.lag.cycle_spans = broken
    assert exporter.export(synthetic_session("open2", end=False)) == SpanExportResult.SUCCESS
    assert wait_for(lambda: worker.crashed is not None, 10)
    assert wait_for(lambda: not worker.running, 10)


@pytest.mark.parametrize("spool", [True, False], ids=["spool", "no-spool"])
def test_open_sessions_are_evaluated_at_the_stop_after_the_worker_died(
    tmp_path: Path, verdicts: VerdictServer, spool: bool
) -> None:
    extra = {} if spool else {"spool": {"enabled": False}}
    sidecar = _sidecar(tmp_path, None, verdicts, on_shutdown="evaluate", **extra)
    assert sidecar.grpc is not None
    exporter = OTLPSpanExporter(endpoint=f"127.0.0.1:{sidecar.grpc.port}", insecure=True)
    try:
        assert exporter.export(synthetic_session("open1", end=False)) == SpanExportResult.SUCCESS
        assert wait_for(lambda: sidecar.worker.pending_spans == 0, 10)
        _kill_the_worker_thread(sidecar, exporter)
    finally:
        exporter.shutdown()
        sidecar.stop()
    assert wait_for(lambda: {"open1", "open2"} <= set(verdicts.received.sessions()), 10), set(
        verdicts.received.sessions()
    )
    if spool:
        assert sidecar.spool.requests == 0  # confirmed, so released


def test_the_finish_after_the_worker_died_is_bounded_by_the_deadline(
    tmp_path: Path, verdicts: VerdictServer, caplog: pytest.LogCaptureFixture
) -> None:
    """An evaluator that hangs in that finish holds the stop no longer than the shutdown
    budget; the sessions stay spooled for the next start, and the log says so."""
    held = _Held("held")
    sidecar = _sidecar(tmp_path, held, verdicts, on_shutdown="evaluate", shutdown_timeout_s=3)
    assert sidecar.grpc is not None
    exporter = OTLPSpanExporter(endpoint=f"127.0.0.1:{sidecar.grpc.port}", insecure=True)
    try:
        _kill_the_worker_thread(sidecar, exporter)
    finally:
        exporter.shutdown()
    _stop_ends_at_the_deadline(
        sidecar,
        held,
        verdicts,
        caplog,
        "open2",
        "worker did not stop in time (evaluating the open sessions)",
    )
