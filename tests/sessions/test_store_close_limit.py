"""A tick that may close only so many sessions leaves the rest open and closes them next."""

from __future__ import annotations

from spanjudge.sessions.store import ClosePolicy, SessionStore
from tests.conftest import span


def test_a_limited_close_takes_the_earliest_and_keeps_the_rest_for_the_next() -> None:
    now = [0.0]
    store = SessionStore(ClosePolicy(idle_timeout_s=60, end_grace_s=0.0), lambda: now[0])
    for i in range(10):
        store.add(
            span(i + 1, trace=i + 1, attrs={"session.id": f"s{i}", "spanjudge.session.end": True})
        )
    now[0] = 1.0
    first = store.close(limit=4)
    assert [c.key for c in first] == ["s0", "s1", "s2", "s3"]
    assert len(store.open) == 6
    second = store.close(limit=4)
    third = store.close(limit=4)
    assert [c.key for c in second + third] == [f"s{i}" for i in range(4, 10)]
    assert all(c.reason == "end_marker" for c in first + second + third)
    assert not store.open and store.close(limit=4) == []


def test_a_limited_shutdown_closes_the_earliest_and_keeps_the_rest_open() -> None:
    store = SessionStore(ClosePolicy(idle_timeout_s=60))
    for i in range(5):  # turns still going (no root span ended)
        store.add(span(i + 1, trace=i + 1, parent=99, attrs={"session.id": f"s{i}"}))
    store.add(span(9, trace=9, parent=3))  # a key-less trace, waiting for its key
    first = store.close("shutdown", limit=4)
    assert [c.key for c in first] == ["s0", "s1", "s2", "s3"]
    assert list(store.open) == ["s4"] and not store.empty
    rest = store.close("shutdown", limit=4)
    assert [c.key for c in rest] == ["s4", format(9, "032x")]
    assert all(c.reason == "shutdown" for c in first + rest)
    assert store.empty and store.close("shutdown", limit=4) == []


def test_evictions_over_the_budget_go_a_limited_close_at_a_time() -> None:
    store = SessionStore(ClosePolicy(idle_timeout_s=60, max_open_sessions=3))
    for i in range(10):
        store.add(span(i + 1, trace=i + 1, attrs={"session.id": f"s{i}"}))
    evicted = store.close(limit=4)
    assert [c.key for c in evicted] == ["s0", "s1", "s2", "s3"]
    assert all(c.reason == "evicted" for c in evicted)
    # more to evict: no request that opened sessions counts as done meanwhile
    assert store.closing_left() and store.closed_before() == 0
    assert [c.key for c in store.close(limit=4)] == ["s4", "s5", "s6"]
    assert not store.closing_left() and store.closed_before() is None
    assert list(store.open) == ["s7", "s8", "s9"]


def test_what_a_limited_close_leaves_due_is_said_by_its_opening_order() -> None:
    now = [0.0]
    store = SessionStore(ClosePolicy(idle_timeout_s=60, end_grace_s=0.0), lambda: now[0])
    for i in range(6):
        store.add(
            span(i + 1, trace=i + 1, attrs={"session.id": f"s{i}", "spanjudge.session.end": True})
        )
    opened_by_first_three = store.opened - 3
    now[0] = 1.0
    store.close(limit=4)
    # s4 and s5 are left due: what opened before them is done with
    assert store.closed_before() == store.open["s4"].order
    assert store.open["s4"].order > opened_by_first_three
    assert store.latest_close_at == 0.0 and store.due_checked_at == 1.0
