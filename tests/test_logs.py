"""`spanjudge.logs`: a registered set-up runs once, before the first logger is handed out, and
a cancelled one never runs."""

from __future__ import annotations

import logging

from spanjudge import logs


def test_set_up_runs_once_before_the_first_logger() -> None:
    calls: list[str] = []
    logs.on_first_use(lambda: calls.append("set up"))
    assert calls == []  # nothing logged yet: nothing set up
    assert logs.logger("spanjudge.test") is logging.getLogger("spanjudge.test")
    assert calls == ["set up"]
    logs.logger("spanjudge.test")
    assert calls == ["set up"]


def test_a_cancelled_set_up_never_runs() -> None:
    calls: list[str] = []

    def set_up() -> None:
        calls.append("set up")

    logs.on_first_use(set_up)
    logs.cancel(set_up)
    logs.logger("spanjudge.test")
    assert calls == []
