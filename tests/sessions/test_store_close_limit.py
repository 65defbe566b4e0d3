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
