"""The lag meter's estimate of how long the waiting spans take to evaluate, against the time
evaluation really took, on a worker clock the test drives."""

from __future__ import annotations

import pytest

from spanjudge.sidecar.lag import LagMeter

_FLOOD = 25_000  # spans of one flood request, one session each
_STALL_TICKS = 10  # ticks of one second that catch nothing up


def _stall_then_catch_up(meter: LagMeter, request_id: int, start: float) -> float:
    """A request of `_FLOOD` spans, accepted at `start`, that no tick catches up until its last
    session closes: ten ticks of a second with work left and nothing caught up, then an
    eleventh that takes it all. Returns the clock after the last tick."""
    meter.accepted(request_id, _FLOOD, start)
    now = start
    for _ in range(_STALL_TICKS):
        now += 1.0
        meter.busy(1.0)
        meter.sample(now, behind=True)
    now += 1.0
    meter.busy(1.0)
    meter.caught_up(request_id)
    meter.sample(now, behind=False)
    return now


def test_a_backlog_caught_up_after_a_stall_counts_the_whole_stall() -> None:
    # eleven seconds for the flood: the next flood request, waiting now, needs as long
    meter = LagMeter()
    now = _stall_then_catch_up(meter, 1, 0.0)
    meter.accepted(2, _FLOOD, now)
    assert meter.expected_wait_s() == pytest.approx(_STALL_TICKS + 1, rel=0.01)


def test_a_stall_while_behind_does_not_make_evaluation_look_faster() -> None:
    # First a worker behind all along, draining 2,500 spans a second of wall time. Then a
    # flood request that goes at almost the same speed, 25,000 spans in eleven seconds (a
    # stall, then the catch-up). A wait estimated afterwards lies between the two measured
    # speeds: ten to eleven seconds for the next 25,000 spans, not one tick's time.
    meter = LagMeter()
    for request_id in range(1, 5):
        meter.accepted(request_id, 2_500, 0.0)
    now = 0.0
    for request_id in range(1, 5):
        now += 1.0
        meter.busy(1.0)
        meter.caught_up(request_id)
        meter.sample(now, behind=True)
    now = _stall_then_catch_up(meter, 5, now)
    meter.accepted(6, _FLOOD, now)
    assert _FLOOD / 2_500 <= meter.expected_wait_s() <= _STALL_TICKS + 1
