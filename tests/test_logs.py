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


def test_a_second_thread_waits_for_the_set_up_another_thread_is_running() -> None:
    import threading

    events: list[str] = []
    started, release = threading.Event(), threading.Event()

    def slow_set_up() -> None:
        started.set()
        release.wait(10)
        events.append("set up done")

    def first_log(label: str) -> None:
        logs.logger("spanjudge.test")
        events.append(label)

    logs.on_first_use(slow_set_up)
    a = threading.Thread(target=first_log, args=("a logged",))
    a.start()
    assert started.wait(10)
    b = threading.Thread(target=first_log, args=("b logged",))
    b.start()
    b.join(0.3)  # b must not log with the set-up half done
    release.set()
    a.join(10)
    b.join(10)
    assert events[0] == "set up done" and sorted(events[1:]) == ["a logged", "b logged"]
