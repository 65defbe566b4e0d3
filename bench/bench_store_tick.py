"""Cost of one session-store tick at 1,000 against 50,000 open sessions: it must not grow with them.

    python bench/bench_store_tick.py [--small 1000] [--large 50000] [--ticks 30]

A tick is ``SessionStore.close()``, called every second by the sidecar's and the processor's
worker. Two ticks are timed at each size: one where nothing is due although the earliest
deadline has passed (the session that held it received a span since), and one where exactly one
session is due (its idle timeout fired). The store keeps its deadlines in a heap, so both should
read about 1x to 2x from small to large (a heap step costs log n, and a larger heap misses the
cache more; a few microseconds either way). The reference is the store's previous tick, kept
below: a scan of every open session, which it ran whenever its lower bound on the next deadline
had passed (in both ticks timed here), measured in the same run; it reads ``large / small``x or
more (the garbage collector walks the larger store too).
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import TYPE_CHECKING

from spanjudge.sessions.store import ClosedSession, ClosePolicy, SessionStore
from spanjudge.spans.record import SpanRecord

if TYPE_CHECKING:
    from spanjudge.sessions.store import CloseReason

_IDLE_S = 900.0
_STEP_S = 0.01  # session i opens at i * _STEP_S: one deadline per step


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class ScanningStore(SessionStore):
    """The previous tick: every open session's deadline computed and compared, each time."""

    def _due(self) -> list[ClosedSession]:
        now = self.clock()
        idle_s = self.policy.idle_timeout_s
        max_age_s = self.policy.max_age_s
        ready: list[ClosedSession] = []
        for key, session in list(self.open.items()):
            deadline = session.last_seen + idle_s
            if max_age_s is not None and session.first_seen + max_age_s < deadline:
                deadline = session.first_seen + max_age_s
            close_at = session.close_at
            if close_at is not None and close_at < deadline:
                deadline = close_at
            if now < deadline:
                continue
            reason: CloseReason
            if close_at is not None and now >= close_at and session.close_reason is not None:
                reason = session.close_reason
            elif now >= session.last_seen + idle_s:
                reason = "idle"
            else:
                reason = "max_age"
            ready.append(self._close(key, reason))
        ready.extend(self._evict_over_budget())
        return ready


def one_span(n: int, key: str) -> SpanRecord:
    return SpanRecord(
        trace_id=f"{n:032x}",
        span_id=f"{n:016x}",
        parent_span_id=None,
        name="invoke_agent",
        start_unix_nano=0,
        end_unix_nano=1,
        status="unset",
        attributes={"session.id": key},
        resource={},
    )


def tick_times(store_type: type[SessionStore], sessions: int, ticks: int) -> tuple[float, float]:
    """Median seconds of a nothing-due tick and of a one-due tick with ``sessions`` open."""
    clock = Clock()
    store = store_type(ClosePolicy(idle_timeout_s=_IDLE_S, max_age_s=None), clock=clock)
    for i in range(sessions):
        clock.now = i * _STEP_S
        store.add(one_span(i + 1, f"s{i}"))
    clock.now = sessions * _STEP_S
    serial = sessions
    nothing_due: list[float] = []
    one_due: list[float] = []
    for t in range(ticks):
        # Session 2t holds the earliest deadline; a span moves it past the whole run.
        serial += 1
        store.add(one_span(serial, f"s{2 * t}"))
        clock.now = 2 * t * _STEP_S + _IDLE_S
        started = time.perf_counter()
        closed = store.close()
        nothing_due.append(time.perf_counter() - started)
        assert closed == [], closed
        # Session 2t+1 now holds it: its idle timeout fires.
        clock.now = (2 * t + 1) * _STEP_S + _IDLE_S
        started = time.perf_counter()
        closed = store.close()
        one_due.append(time.perf_counter() - started)
        assert [c.key for c in closed] == [f"s{2 * t + 1}"], [c.key for c in closed]
    return statistics.median(nothing_due), statistics.median(one_due)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--small", type=int, default=1_000, help="open sessions, small store")
    parser.add_argument("--large", type=int, default=50_000, help="open sessions, large store")
    parser.add_argument("--ticks", type=int, default=30, help="ticks of each kind timed")
    args = parser.parse_args()
    if args.small < 2 * args.ticks:
        parser.error("--small must be at least twice --ticks (each tick uses up two sessions)")
    print(f"median seconds per tick, {args.ticks} ticks of each kind, idle timeout {_IDLE_S:g} s")
    for label, store_type in (
        ("heap (SessionStore)", SessionStore),
        ("scan (previous)", ScanningStore),
    ):
        small = tick_times(store_type, args.small, args.ticks)
        large = tick_times(store_type, args.large, args.ticks)
        for kind, small_s, large_s in zip(("nothing due", "one due"), small, large, strict=True):
            print(
                f"{label:20} {kind:12} {args.small:>7,}: {small_s * 1e6:9.1f} us"
                f"  {args.large:>7,}: {large_s * 1e6:9.1f} us  ratio {large_s / small_s:7.1f}x"
            )


if __name__ == "__main__":
    main()
