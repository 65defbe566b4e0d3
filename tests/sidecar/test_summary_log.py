"""What `serve` logs about verdicts: one INFO line per interval, one DEBUG line per session."""

from __future__ import annotations

import logging
import re
import time

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from tests.sidecar.conftest import MakeSidecar
from tests.sidecar.helpers import synthetic_session, wait_for


def test_the_interval_line_counts_outcomes_open_sessions_and_export(
    make_sidecar: MakeSidecar, caplog: pytest.LogCaptureFixture
) -> None:
    sidecar = make_sidecar(sessions={"mode": "session", "idle_timeout_s": 60, "end_grace_s": 0})
    assert sidecar.endpoints is not None and sidecar.endpoints.grpc is not None
    exporter = OTLPSpanExporter(endpoint=sidecar.endpoints.grpc, insecure=True)
    with caplog.at_level(logging.DEBUG, logger="spanjudge.sidecar"):
        # One session ends and misses the skill it had to load; one stays open.
        done = synthetic_session("judged-1", expected_skills=("csv-report",))
        assert exporter.export(done) == SpanExportResult.SUCCESS
        assert exporter.export(synthetic_session("open-1", end=False)) == SpanExportResult.SUCCESS
        assert wait_for(lambda: sidecar.worker.evaluated_sessions == 1)
        sidecar.summary.log_interval()
        sidecar.summary.log_interval()  # nothing judged since: said so
    exporter.shutdown()
    debug = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert any(m.startswith("session judged-1: skill_loaded=FAIL ") for m in debug), debug
    info = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    first, second = info[-2:]
    assert first.startswith("judged 1 session in the last 60s: ")
    assert "skill_loaded 0 pass 1 fail 0 n/e" in first
    assert "; 1 open, the oldest for " in first and first.endswith("; verdict export off")
    assert second.startswith("no session judged in the last 60s; 1 open")


@pytest.mark.slow
def test_the_interval_line_counts_open_sessions_of_evaluation_processes(
    make_sidecar: MakeSidecar, caplog: pytest.LogCaptureFixture
) -> None:
    # With `serve.workers: 2` the sessions are held in the evaluation processes, not in the
    # process that logs the line: it still says how many are open and for how long.
    sidecar = make_sidecar(
        sessions={"mode": "session", "idle_timeout_s": 60, "end_grace_s": 0}, workers=2
    )
    assert sidecar.endpoints is not None and sidecar.endpoints.grpc is not None
    exporter = OTLPSpanExporter(endpoint=sidecar.endpoints.grpc, insecure=True)
    with caplog.at_level(logging.INFO, logger="spanjudge.sidecar"):
        assert exporter.export(synthetic_session("judged-1")) == SpanExportResult.SUCCESS
        for key in ("open-1", "open-2", "open-3"):
            assert exporter.export(synthetic_session(key, end=False)) == SpanExportResult.SUCCESS
        assert wait_for(lambda: sidecar.worker.evaluated_sessions == 1)
        # every process has taken its sessions in (a loaded machine may take a while)
        assert wait_for(lambda: (sidecar.worker.open_sessions() or (0, None))[0] == 3)
        time.sleep(1.5)  # the open sessions' age, and a few reports from each process
        sidecar.summary.log_interval()
    exporter.shutdown()
    info = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    line = info[-1]
    assert line.startswith("judged 1 session in the last 60s: "), line
    match = re.search(r"; 3 open, the oldest for (\d+)s; ", line)
    assert match is not None, line
    assert 1 <= int(match.group(1)) <= 30, line
