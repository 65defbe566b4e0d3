"""Session assembly: keys, traces, de-duplication, out-of-order arrival, close policies."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

import pytest

from spanjudge.sessions import store as store_module
from spanjudge.sessions.store import ClosedSession, ClosePolicy, SessionStore
from tests.conftest import span

if TYPE_CHECKING:
    from spanjudge.sessions.store import CloseReason


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_key_precedence_conversation_id_then_session_id_then_resource():
    store = SessionStore()
    store.add(span(1, trace=1, attrs={"gen_ai.conversation.id": "conv", "session.id": "sess"}))
    store.add(span(2, trace=2, attrs={"session.id": "sess"}))
    store.add(span(3, trace=3, resource={"session.id": "from-resource"}))
    closed = {c.key: c for c in store.close("end_of_input")}
    assert closed["conv"].key_source == "gen_ai.conversation.id"
    assert closed["sess"].key_source == "session.id"
    assert closed["from-resource"].key_source == "session.id"


def test_configured_key_attribute_is_used_after_the_standard_ones():
    store = SessionStore(ClosePolicy(key_attributes=("app.thread",)))
    store.add(span(1, attrs={"app.thread": "t-9"}))
    [closed] = store.close("end_of_input")
    assert (closed.key, closed.key_source) == ("t-9", "app.thread")


def test_keyless_trace_is_its_own_session_and_says_so():
    store = SessionStore()
    store.add(span(1, trace=7))
    store.add(span(2, trace=7, parent=1))
    [closed] = store.close("end_of_input")
    assert closed.key == format(7, "032x") and closed.key_source == "trace_id"
    assert len(closed.spans) == 2


def test_turns_across_traces_and_child_before_parent():
    store = SessionStore()
    # trace 1: the child (no key) arrives before its keyed root
    store.add(span(2, trace=1, parent=1, start=10))
    store.add(span(1, trace=1, start=5, attrs={"session.id": "s"}))
    # trace 2 interleaved with trace 3 of another session
    store.add(span(4, trace=2, parent=3, start=30))
    store.add(span(9, trace=3, start=31, attrs={"session.id": "other"}))
    store.add(span(3, trace=2, start=29, attrs={"session.id": "s"}))
    closed = {c.key: c for c in store.close("end_of_input")}
    assert sorted(s.span_id[-1] for s in closed["s"].spans) == ["1", "2", "3", "4"]
    assert [s.span_id[-1] for s in closed["other"].spans] == ["9"]


def test_repeated_spans_are_kept_once():
    store = SessionStore()
    one = span(1, attrs={"session.id": "s"})
    store.add(one)
    store.add(one)
    [closed] = store.close("end_of_input")
    assert len(closed.spans) == 1 and store.duplicates == 1


def test_explicit_end_marker_closes_after_grace():
    clock = Clock()
    store = SessionStore(ClosePolicy(end_grace_s=2), clock=clock)
    store.add(span(1, attrs={"session.id": "s", "spanjudge.session.end": True}))
    assert store.close() == []
    clock.now += 2
    [closed] = store.close()
    assert closed.reason == "end_marker" and closed.complete


def test_idle_timeout_and_max_age():
    clock = Clock()
    store = SessionStore(ClosePolicy(per_turn=False, idle_timeout_s=60, max_age_s=100), clock=clock)
    store.add(span(1, trace=1, attrs={"session.id": "idle"}))
    store.add(span(2, trace=2, attrs={"session.id": "busy"}))
    clock.now += 59
    store.add(span(3, trace=2, attrs={"session.id": "busy"}))
    assert store.close() == []
    clock.now += 1
    [idle] = store.close()
    assert idle.key == "idle" and idle.reason == "idle" and idle.complete
    for _ in range(4):
        clock.now += 10
        store.add(span(10 + int(clock.now), trace=2, attrs={"session.id": "busy"}))
    [old] = store.close()
    assert old.key == "busy" and old.reason == "max_age" and not old.complete


def test_per_turn_mode_closes_when_the_root_span_ends():
    clock = Clock()
    store = SessionStore(ClosePolicy(per_turn=True, turn_grace_s=1), clock=clock)
    store.add(span(2, parent=1, attrs={"session.id": "s"}))
    clock.now += 5
    assert store.close() == []  # a child span does not end the turn
    store.add(span(1, attrs={"session.id": "s"}))
    clock.now += 1
    [closed] = store.close()
    assert closed.reason == "turn" and len(closed.spans) == 2


def test_by_default_a_turn_closes_when_its_root_span_ends_with_or_without_a_session_key():
    clock = Clock()
    store = SessionStore(ClosePolicy(turn_grace_s=1), clock=clock)
    store.add(span(2, parent=1, attrs={"session.id": "s"}))
    store.add(span(1, attrs={"session.id": "s"}))
    store.add(span(4, trace=2, parent=3))  # no session key: the trace is the session
    store.add(span(3, trace=2))
    clock.now += 1
    closed = store.close()
    assert [(c.key_source, c.reason, c.complete, len(c.spans)) for c in closed] == [
        ("session.id", "turn", True, 2),
        ("trace_id", "turn", True, 2),
    ]


def test_at_shutdown_only_a_turn_still_going_is_cut_short():
    clock = Clock()
    store = SessionStore(ClosePolicy(turn_grace_s=5), clock=clock)
    store.add(span(2, parent=1, attrs={"session.id": "ended"}))
    store.add(span(1, attrs={"session.id": "ended"}))  # its root ended: in its grace period
    store.add(span(4, trace=2, parent=3, attrs={"session.id": "going"}))  # root not ended
    store.add(span(6, trace=3, parent=5))
    store.add(span(5, trace=3))  # a key-less trace whose root ended
    closed = store.close("shutdown")
    assert sorted((c.reason, c.complete) for c in closed) == [
        ("shutdown", False),
        ("turn", True),
        ("turn", True),
    ]
    assert [c.key for c in closed if not c.complete] == ["going"]


def test_late_span_reopens_with_next_revision_and_earlier_spans():
    clock = Clock()
    store = SessionStore(ClosePolicy(per_turn=False, idle_timeout_s=10), clock=clock)
    store.add(span(1, attrs={"session.id": "s"}))
    clock.now += 10
    [first] = store.close()
    assert first.revision == 1
    store.add(span(2, attrs={"session.id": "s"}))
    [second] = store.close("shutdown")
    assert second.revision == 2 and len(second.spans) == 2 and not second.complete


def test_memory_budget_evicts_oldest_as_incomplete():
    store = SessionStore(ClosePolicy(max_open_bytes=2000))
    for i in range(1, 6):
        store.add(span(i, trace=i, attrs={"session.id": f"s{i}", "blob": "x" * 300}))
    evicted = store.close()
    assert evicted and all(c.reason == "evicted" and not c.complete for c in evicted)
    assert evicted[0].key == "s1"
    assert store.open_bytes <= 2000
    assert store.evicted == len(evicted)


def test_late_span_after_spans_were_released_is_a_partial_incomplete_revision():
    clock = Clock()
    store = SessionStore(
        ClosePolicy(per_turn=False, idle_timeout_s=10, keep_closed_sessions=0), clock=clock
    )
    store.add(span(1, attrs={"session.id": "s"}))
    clock.now += 10
    [first] = store.close()
    assert first.complete
    store.add(span(2, attrs={"session.id": "s"}))
    [second] = store.close("end_of_input")
    assert second.revision == 2 and len(second.spans) == 1
    assert second.partial and not second.complete


def test_sessions_opened_after_an_empty_scan_still_close():
    clock = Clock()
    store = SessionStore(
        ClosePolicy(per_turn=False, idle_timeout_s=10, max_age_s=None), clock=clock
    )
    assert store.close() == []  # nothing open: the next possible deadline is unknown
    store.add(span(1, trace=1, attrs={"session.id": "a"}))
    store.add(span(2, trace=2))  # key-less trace, waiting for a key
    clock.now += 5
    assert store.close() == []
    store.add(span(3, trace=3, attrs={"session.id": "b", "spanjudge.session.end": True}))
    clock.now += 2
    assert [c.key for c in store.close()] == ["b"]  # the marker's grace beats a's idle timeout
    clock.now += 3
    assert sorted(c.key for c in store.close()) == sorted(["a", format(2, "032x")])


class CountingReading(float):
    """A clock reading that counts how often it is compared (each is one deadline looked at)."""

    compared = 0

    def _count(self) -> None:
        CountingReading.compared += 1

    def __lt__(self, other: object) -> bool:
        self._count()
        return float(self) < other  # type: ignore[operator]

    def __le__(self, other: object) -> bool:
        self._count()
        return float(self) <= other  # type: ignore[operator]

    def __gt__(self, other: object) -> bool:
        self._count()
        return float(self) > other  # type: ignore[operator]

    def __ge__(self, other: object) -> bool:
        self._count()
        return float(self) >= other  # type: ignore[operator]


def test_a_tick_looks_only_at_sessions_whose_time_has_come():
    clock = Clock()
    store = SessionStore(
        ClosePolicy(per_turn=False, idle_timeout_s=60, max_age_s=None, end_grace_s=2), clock=clock
    )
    for i in range(50_000):
        store.add(span(i + 1, trace=i + 1, attrs={"session.id": f"s{i}"}))
    clock.now += 30
    store.add(span(50_001, trace=50_001, attrs={"session.id": "s7"}))  # busy: deadline moves
    store.add(span(50_002, trace=50_002, attrs={"session.id": "s9", "spanjudge.session.end": 1}))

    CountingReading.compared = 0
    clock.now = CountingReading(1000.0 + 31)  # nothing due
    assert store.close() == []
    assert CountingReading.compared < 50, CountingReading.compared

    CountingReading.compared = 0
    clock.now = CountingReading(1000.0 + 32)  # only the ended session is due
    assert [c.key for c in store.close()] == ["s9"]
    assert CountingReading.compared < 50, CountingReading.compared

    clock.now = 1000.0 + 60  # everyone's idle timeout but the one a span moved
    closed = store.close()
    assert len(closed) == 49_998 and "s7" not in {c.key for c in closed}
    assert [c.key for c in closed[:3]] == ["s0", "s1", "s2"]  # in the order they opened
    clock.now = 1000.0 + 30 + 60
    assert [c.key for c in store.close()] == ["s7"]


class ScanningStore(SessionStore):
    """The store's previous tick, as the reference: every open session and every key-less trace
    looked at, in the order they opened, on each tick."""

    def _due(self, limit: int | None = None) -> list[ClosedSession]:
        now = self.clock()
        idle_s = self.policy.idle_timeout_s
        max_age_s = self.policy.max_age_s
        ready: list[ClosedSession] = []
        for key, session in list(self.open.items()):
            idle_at = session.last_seen + idle_s
            aged = max_age_s is not None and now >= session.first_seen + max_age_s
            marked = session.close_at is not None and now >= session.close_at
            if not (now >= idle_at or aged or marked):
                continue
            reason: CloseReason
            if marked and session.close_reason is not None:
                reason = session.close_reason
            elif now >= idle_at:
                reason = "idle"
            else:
                reason = "max_age"
            ready.append(self._close(key, reason))
        for trace_id, since in list(self._pending_since.items()):
            turn_end = self._pending_turn_end.get(trace_id)
            if turn_end is not None and now >= turn_end:
                ready.extend(self._close_pending(trace_id, "turn"))
            elif now - since >= idle_s:
                ready.extend(self._close_pending(trace_id, "idle"))
        ready.extend(self._evict_over_budget())
        return ready


def test_ticks_close_what_a_scan_of_every_session_closes():
    for seed in range(150):
        rnd = random.Random(seed)
        policy = ClosePolicy(
            idle_timeout_s=rnd.choice([0.7, 3.0, 10.0]),
            max_age_s=rnd.choice([None, 5.5, 20.0]),
            end_grace_s=rnd.choice([0.0, 1.3, 2.0]),
            per_turn=rnd.random() < 0.5,
            turn_grace_s=rnd.choice([0.5, 2.0]),
            max_open_sessions=rnd.choice([8, 100_000]),
            keep_closed_sessions=rnd.choice([0, 3]),
        )
        clock = Clock()
        heap, scan = SessionStore(policy, clock=clock), ScanningStore(policy, clock=clock)
        for step in range(300):
            roll = rnd.random()
            if roll < 0.55:
                attrs: dict[str, object] = {}
                if rnd.random() < 0.7:
                    attrs["session.id"] = f"s{rnd.randint(1, 12)}"
                if rnd.random() < 0.1:
                    attrs["spanjudge.session.end"] = True
                parent = None if rnd.random() < 0.3 else 1
                one = span(step + 1, trace=rnd.randint(1, 30), parent=parent, attrs=attrs)
                heap.add(one)
                scan.add(one)
            elif roll < 0.85:
                clock.now += rnd.choice([0.1, 0.5, 0.7, 1.0, 3.0, -1.0 if roll < 0.57 else 5.0])
            else:
                reason: CloseReason | None = "end_of_input" if roll > 0.99 else None
                got = [
                    (c.key, c.reason, c.revision, c.partial, len(c.spans))
                    for c in heap.close(reason)
                ]
                want = [
                    (c.key, c.reason, c.revision, c.partial, len(c.spans))
                    for c in scan.close(reason)
                ]
                assert got == want, (seed, step)
        assert list(heap.open) == list(scan.open)


def test_a_clock_that_went_back_brings_the_idle_close_sooner():
    clock = Clock()
    store = SessionStore(
        ClosePolicy(per_turn=False, idle_timeout_s=60, max_age_s=None), clock=clock
    )
    store.add(span(1, attrs={"session.id": "s"}))  # at 1000: idle close due at 1060
    clock.now = 900.0
    store.add(span(2, attrs={"session.id": "s"}))  # the clock went back: now due at 960
    clock.now = 959.0
    assert store.close() == []
    clock.now = 960.0
    [closed] = store.close()
    assert (closed.key, closed.reason, len(closed.spans)) == ("s", "idle", 2)


def test_a_later_span_moves_the_idle_close_later():
    clock = Clock()
    store = SessionStore(
        ClosePolicy(per_turn=False, idle_timeout_s=60, max_age_s=None), clock=clock
    )
    store.add(span(1, attrs={"session.id": "s"}))
    clock.now = 1050.0
    store.add(span(2, attrs={"session.id": "s"}))  # due at 1110 now, not 1060
    clock.now = 1100.0
    assert store.close() == []
    clock.now = 1110.0
    assert [c.reason for c in store.close()] == ["idle"]


def test_per_turn_in_the_configuration_is_true_or_false() -> None:
    from spanjudge.config import parse_config
    from spanjudge.errors import ConfigError

    assert parse_config({"sessions": {"per_turn": False}}).policy.per_turn is False
    try:
        parse_config({"sessions": {"per_turn": "yes"}})
    except ConfigError as exc:
        assert "sessions.per_turn: expected true or false, got 'yes'" in str(exc)
    else:
        raise AssertionError("accepted")


def test_a_late_span_joins_its_open_session_however_many_traces_came_since(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The store remembers a bounded number of traces (lowered here); a session still open keeps
    # its traces remembered while closed sessions' are forgotten.
    monkeypatch.setattr(store_module, "_MAX_TRACE_KEYS", 40)
    store = SessionStore(ClosePolicy(idle_timeout_s=1e9, max_age_s=None))
    store.add(span(1, trace=1, parent=99, attrs={"session.id": "open"}))  # not the trace's root
    for i in range(2, 400):  # sessions that end at once, one trace each
        store.add(span(i, trace=i, attrs={"session.id": f"s{i}", "spanjudge.session.end": True}))
        store.close()
    store.add(span(400, trace=1, parent=1))  # no session key: it joins by its trace
    closed = {c.key: c for c in store.close("end_of_input")}
    assert sorted(s.span_id for s in closed["open"].spans) == [format(i, "016x") for i in (1, 400)]
    assert format(1, "032x") not in closed  # not a session of its own
