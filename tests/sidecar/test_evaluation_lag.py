"""Backpressure by evaluation lag (`serve.max_pending_age_s`): when what is waiting would take
evaluation longer than the bound allows, at the rate evaluation has been measured to go, new
requests are refused retryably, before the oldest waiting one has aged that long; and nothing
accepted is lost once evaluation catches up."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import grpc
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from spanjudge.values import Verdict
from tests.sidecar.helpers import VerdictServer, synthetic_session, wait_for
from tests.sidecar.raw_requests import grpc_call, post
from tests.sidecar.workers_helpers import _Raising, _sidecar

pytestmark = pytest.mark.slow


class _Slow(_Raising):
    """An evaluator that takes 0.1 s a session: evaluation runs at about 10 sessions/s."""

    def evaluate(self, ctx: Any) -> list[Verdict]:
        time.sleep(0.1)
        return super().evaluate(ctx)


def _request(prefix: str, sessions: int) -> bytes:
    spans = [s for i in range(sessions) for s in synthetic_session(f"{prefix}-{i:02d}")]
    return encode_spans(spans).SerializeToString()


def test_a_backlog_evaluation_cannot_finish_in_time_is_refused_before_it_ages(
    tmp_path: Path, verdicts: VerdictServer
) -> None:
    # a bound of 2 s: a backlog needing more than 1 s at the measured rate is refused; span
    # count and spool far from their bounds. Sessions close as their end marker arrives.
    sidecar = _sidecar(
        tmp_path,
        _Slow("slow", RuntimeError(), set()),
        verdicts,
        sessions={"idle_timeout_s": 60, "end_grace_s": 0},
        max_pending_age_s=2,
        max_pending_spans=1_000_000,
    )
    try:
        # evaluation's rate is measured on a first backlog (20 sessions, about 2 s)
        code, _ = grpc_call(sidecar, _request("warm", 20))
        assert code == grpc.StatusCode.OK
        warm = {f"warm-{i:02d}" for i in range(20)}
        assert wait_for(lambda: warm <= set(verdicts.received.sessions()), 30)
        # 20 sessions more are taken (nothing waits), the next 20 are not: those waiting
        # need about 2 s, twice what the bound leaves for what waits, and have waited less
        # than the bound
        code, _ = grpc_call(sidecar, _request("first", 20))
        assert code == grpc.StatusCode.OK
        code, details = grpc_call(sidecar, _request("second", 20))
        assert code == grpc.StatusCode.UNAVAILABLE
        assert "for what is waiting" in details
        status, headers, text = post(sidecar, _request("second", 20))
        assert status == 503 and int(headers["Retry-After"]) >= 1
        assert b"for what is waiting" in text
        assert sidecar.handler.counts.get("unavailable", 0) >= 2  # counted
        # once evaluation caught up, the same request is taken, and every session judged once
        first = {f"first-{i:02d}" for i in range(20)}
        assert wait_for(lambda: first <= set(verdicts.received.sessions()), 30)
        assert wait_for(lambda: sidecar.worker.lag.spans == 0, 10)
        code, _ = grpc_call(sidecar, _request("second", 20))
        assert code == grpc.StatusCode.OK
        second = {f"second-{i:02d}" for i in range(20)}
        assert wait_for(lambda: second <= set(verdicts.received.sessions()), 30)
        assert all(revs == {1} for revs in verdicts.received.sessions().values())
    finally:
        sidecar.stop()
