"""The one internal-error guard (spanjudge/guard.py): under the test suite it re-raises, so a
regression a guard would hide fails its test; contained (as for users) it logs once per place,
counts every failure and reports each to its owner's metric."""

from __future__ import annotations

import contextlib
import logging
import os
import threading

import pytest

from spanjudge.guard import RAISE_ENV, Guard, contained, raising


def _fail(guard: Guard, where: str) -> None:
    try:
        raise ValueError(f"bug in {where}")
    except ValueError:
        guard.failed(where)


def test_the_suite_runs_with_guards_that_re_raise() -> None:
    assert os.environ.get(RAISE_ENV) == "1" and raising()
    guard = Guard(logging.getLogger("spanjudge.test"), "probe")
    with pytest.raises(ValueError, match="bug in tick"):
        _fail(guard, "tick")
    assert guard.errors == 1  # counted before it re-raised


def test_contained_it_logs_once_per_place_and_counts_each(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[str] = []
    guard = Guard(logging.getLogger("spanjudge.test"), "probe", on_error=seen.append)
    with contained(), caplog.at_level(logging.ERROR, logger="spanjudge.test"):
        assert not raising()
        for where in ("tick", "tick", "emit", "tick"):
            _fail(guard, where)
    assert guard.errors == 4 and seen == ["tick", "tick", "emit", "tick"]
    assert [r.getMessage() for r in caplog.records] == [
        "probe tick failed (logged once, every occurrence counted)",
        "probe emit failed (logged once, every occurrence counted)",
    ]
    assert all(r.exc_info is not None for r in caplog.records)  # with the traceback
    assert raising()  # the opt-out ends with its block


def test_a_failing_metric_does_not_hide_the_failure() -> None:
    def broken(where: str) -> None:
        raise RuntimeError("meter gone")

    guard = Guard(logging.getLogger("spanjudge.test"), "probe", on_error=broken)
    with pytest.raises(ValueError):
        _fail(guard, "tick")


class _MeetingSet(set[str]):
    """The guard's record of places already logged, with the gap between looking and adding
    widened: a membership test answers only after a second thread's looked too (or a second
    passed), as two threads failing in one place at once may interleave."""

    def __init__(self) -> None:
        super().__init__()
        self.barrier = threading.Barrier(2, timeout=1.0)

    def __contains__(self, item: object) -> bool:
        found = super().__contains__(item)
        with contextlib.suppress(threading.BrokenBarrierError):
            self.barrier.wait()
        return found


def test_two_threads_failing_in_one_place_at_once_log_it_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    guard = Guard(logging.getLogger("spanjudge.test"), "probe")
    guard._warned = _MeetingSet()
    threads = [threading.Thread(target=_fail, args=(guard, "tick")) for _ in range(2)]
    with contained(), caplog.at_level(logging.ERROR, logger="spanjudge.test"):
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
    assert [r.getMessage() for r in caplog.records] == [
        "probe tick failed (logged once, every occurrence counted)"
    ]
    assert guard.errors == 2


def test_a_failing_metric_does_not_cost_the_log_line(caplog: pytest.LogCaptureFixture) -> None:
    def broken(where: str) -> None:
        raise RuntimeError("meter gone")

    guard = Guard(logging.getLogger("spanjudge.test"), "probe", on_error=broken)
    with contained(), caplog.at_level(logging.ERROR, logger="spanjudge.test"):
        _fail(guard, "tick")
    assert [r.getMessage() for r in caplog.records] == [
        "probe tick failed (logged once, every occurrence counted)"
    ]
