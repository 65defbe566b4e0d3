"""The one internal-error guard (spanjudge/guard.py): under the test suite it re-raises, so a
regression a guard would hide fails its test; contained (as for users) it logs once per place,
counts every failure and reports each to its owner's metric."""

from __future__ import annotations

import logging
import os

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
