"""Open sessions: grouping spans by session key, de-duplication, and the close policies."""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import islice
from sys import getsizeof
from typing import Literal

from spanjudge import semconv
from spanjudge.sessions.deadlines import DeadlineQueue
from spanjudge.sessions.keys import TRACE_ID_SOURCE, session_key
from spanjudge.sessions.revisions import Revisions
from spanjudge.sessions.sizes import SESSION_BASE, estimate_size
from spanjudge.spans.record import SpanRecord

CloseReason = Literal[
    "end_marker", "idle", "max_age", "turn", "end_of_input", "shutdown", "evicted"
]


# Reasons after which the session may still have been going: evaluated, marked incomplete.
INCOMPLETE_REASONS = frozenset({"shutdown", "evicted", "max_age"})
_MAX_TRACE_KEYS = 200_000
_SESSION_END = semconv.SJ_SESSION_END
_END_VALUES = (True, "true", "True", 1)  # what marks a session's end (== comparisons)
_NO_TRACES: frozenset[str] = frozenset()  # shared: each empty frozenset is an object of its own
__all__ = ["ClosePolicy", "ClosedSession", "OpenSession", "SessionStore", "estimate_size"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ClosePolicy:
    """When sessions close. Times are seconds on the store's clock."""

    idle_timeout_s: float = 900.0
    max_age_s: float | None = 6 * 3600.0
    end_grace_s: float = 2.0
    # A turn closes (and the session is evaluated, a new revision per turn) when the root span
    # of its trace ends: the request is over, whichever convention traced it. None: on for the
    # online front ends, off offline, where the whole input is there to evaluate at its end.
    per_turn: bool | None = None
    turn_grace_s: float = 2.0
    max_open_bytes: int = 256 * 1024 * 1024
    max_open_sessions: int = 100_000
    # closed sessions whose spans are kept so a late span can re-open them whole; their
    # revision numbers are kept for many more (a re-opened session without its earlier spans
    # is evaluated as incomplete)
    keep_closed_sessions: int = 1_000
    keep_closed_revisions: int = 100_000
    key_attributes: tuple[str, ...] = ()


@dataclass(slots=True)
class OpenSession:
    key: str
    key_source: str
    revision: int
    first_seen: float
    last_seen: float
    spans: list[SpanRecord] = field(default_factory=list)
    seen: set[tuple[str, str]] = field(default_factory=set)
    size_bytes: int = 0
    partial: bool = False
    close_at: float | None = None
    close_reason: CloseReason | None = None
    order: int = 0  # place in the store's opening order (the order due sessions close in)


@dataclass(frozen=True, slots=True, kw_only=True)
class ClosedSession:
    key: str
    key_source: str
    revision: int
    reason: CloseReason
    spans: tuple[SpanRecord, ...]
    # re-opened after its earlier spans were released: this evaluation sees only part of it
    partial: bool = False
    # the traces of its spans that carry no session key (joined to it by their trace)
    keyless_traces: frozenset[str] = _NO_TRACES

    @property
    def complete(self) -> bool:
        return not self.partial and self.reason not in INCOMPLETE_REASONS


class SessionStore:
    """Groups spans into sessions and decides when each closes.

    Not thread-safe: one owner (the processor's worker, the sidecar's pipeline) calls it.
    ``clock`` is injectable; offline runs use event time (the latest span end seen). A session's
    revision comes from ``revisions`` (by default a ledger of its own, remembering the policy's
    ``keep_closed_revisions`` keys).
    """

    def __init__(
        self,
        policy: ClosePolicy | None = None,
        clock: Callable[[], float] = time.monotonic,
        revisions: Revisions | None = None,
    ) -> None:
        self.policy = policy or ClosePolicy()
        self.clock = clock
        self._per_turn = self.policy.per_turn is not False
        self.revisions = (
            Revisions(self.policy.keep_closed_revisions) if revisions is None else revisions
        )
        self.open: OrderedDict[str, OpenSession] = OrderedDict()
        self._trace_key: dict[str, str] = {}
        # its size that makes `_remember_trace` forget (`_MAX_TRACE_KEYS`, or more while open
        # sessions hold more traces)
        self._trace_key_bound = _MAX_TRACE_KEYS
        self._pending: dict[str, list[SpanRecord]] = {}  # spans of traces with no key yet
        self._pending_since: dict[str, float] = {}
        self._pending_bytes: dict[str, int] = {}
        self._pending_turn_end: dict[str, float] = {}  # key-less traces whose root span ended
        # open sessions that hold spans with no session key of their own: their traces
        self._keyless: dict[str, set[str]] = {}
        # spans of the last closed sessions (their size and key-less traces), kept so a late
        # span re-opens them whole
        self._closed_spans: OrderedDict[str, tuple[tuple[SpanRecord, ...], int, frozenset[str]]] = (
            OrderedDict()
        )
        # The memory budget (`max_open_bytes`) covers all three: open sessions, the spans of
        # traces with no session key yet, and the retained spans of closed sessions.
        self.open_bytes = 0
        self.pending_bytes = 0
        self.retained_bytes = 0
        # Open sessions and key-less traces by the earliest time a close policy may fire for
        # them, so a tick visits only those whose time has come, not every open session.
        self._deadlines = DeadlineQueue()
        self._pending_deadlines = DeadlineQueue()
        # Sessions and key-less traces found due that a `close` with a ``limit`` left for the
        # next one, in opening order: ``(order, key)``, stale once the key closed (or opened
        # again) since.
        self._overdue: deque[tuple[int, str]] = deque()
        self._overdue_traces: deque[tuple[int, str]] = deque()
        self._opened = 0  # sessions and key-less traces so far: their `order`
        self.duplicates = 0
        self.reopened = 0
        self.evicted = 0
        self.due_checked_at = float("-inf")  # the clock reading of the last `close()`
        # the latest time an end marker's or a turn's close was set for (its grace ends)
        self.latest_close_at = float("-inf")
        # spans whose session key attribute held no string or integer (`sessions.keys`)
        self.refused_keys = 0

    # --- intake ---

    def add(
        self,
        span: SpanRecord,
        size: int | None = None,
        *,
        found: tuple[str, str] | None = None,
        looked_up: bool = False,
    ) -> None:
        """Take ``span`` into its session (``size``: its `estimate_size`, when known; with
        ``looked_up``, ``found`` is its `session_key` with the policy's key attributes, and
        the caller counts in `refused_keys` the key attributes it skipped)."""
        now = self.clock()
        if not looked_up:
            found = session_key(span, self.policy.key_attributes, self._refused_key)
        if found is None:
            key = self._trace_key.get(span.trace_id)
            if key is None:
                self._pending.setdefault(span.trace_id, []).append(span)
                if size is None:
                    size = estimate_size(span)
                self._pending_bytes[span.trace_id] = (
                    self._pending_bytes.get(span.trace_id, 0) + size
                )
                self.pending_bytes += size
                if span.trace_id not in self._pending_since:
                    self._pending_since[span.trace_id] = now
                    self._opened += 1
                    self._pending_deadlines.schedule(
                        span.trace_id, self._opened, _lower_bound(now, self.policy.idle_timeout_s)
                    )
                if self._per_turn and span.parent_span_id is None:
                    # The root of a trace with no session key ended: that trace is the session.
                    close_at = now + self.policy.turn_grace_s
                    self._pending_turn_end[span.trace_id] = close_at
                    self.latest_close_at = max(self.latest_close_at, close_at)
                    self._pending_deadlines.lower(span.trace_id, close_at)
                return
            self._append(key, "", span, now, size, keyless=True)
            return
        key, source = found
        trace_id = span.trace_id
        if trace_id not in self._trace_key:
            self._remember_trace(trace_id, key)
        self._append(key, source, span, now, size)
        # Spans of its trace that waited for a key (each has its `_pending_since` entry).
        if trace_id in self._pending_since:
            waiting = self._pending.pop(trace_id, None)
            self._forget_pending(trace_id)
            if waiting and self._trace_key[trace_id] == key:
                for earlier in waiting:
                    self._append(key, source, earlier, now, keyless=True)

    def _remember_trace(self, trace_id: str, key: str) -> None:
        """Later spans of ``trace_id`` join session ``key``, whichever way the trace came in,
        keyed or judged alone. The map is bounded: past its bound the oldest quarter
        (insertion order) is looked at, and the traces whose session has closed are forgotten.
        An open session's trace is kept, as the newest, so that its late spans still join it;
        the open sessions' budgets bound those. The next look comes a quarter later at the
        earliest, so each trace costs about the same whatever is open."""
        trace_keys = self._trace_key
        trace_keys[trace_id] = key
        if len(trace_keys) > self._trace_key_bound:
            quarter = _MAX_TRACE_KEYS // 4
            for old in list(islice(trace_keys, quarter)):
                session = trace_keys.pop(old)
                if session in self.open:
                    trace_keys[old] = session
            self._trace_key_bound = max(_MAX_TRACE_KEYS, len(trace_keys) + quarter)

    def _refused_key(self) -> None:
        self.refused_keys += 1

    @property
    def opened(self) -> int:
        """Sessions and key-less traces opened so far (the last one's `OpenSession.order`)."""
        return self._opened

    def release_pending(self, trace_id: str) -> int:
        """Drop the spans of a key-less trace still waiting for its key (another store took
        them); returns how many were dropped."""
        spans = self._pending.pop(trace_id, [])
        self._forget_pending(trace_id)
        return len(spans)

    def add_all(self, spans: Iterable[SpanRecord]) -> None:
        for span in spans:
            self.add(span)

    def _append(
        self,
        key: str,
        source: str,
        span: SpanRecord,
        now: float,
        size: int | None = None,
        *,
        keyless: bool = False,
    ) -> None:
        """Take ``span`` into the session of ``key`` (``keyless``: the span carries no session
        key, it joins by its trace)."""
        session = self.open.get(key)
        if session is None:
            revision, reopened = self.revisions.open(key)
            kept = self._closed_spans.pop(key, None)
            earlier = None
            if kept is not None:
                earlier, kept_bytes, kept_keyless = kept
                self.retained_bytes -= kept_bytes
                if kept_keyless:
                    self._keyless[key] = set(kept_keyless)
            # Re-opened without its earlier spans: this evaluation sees only part of it.
            partial = reopened and earlier is None
            if reopened:
                self.reopened += 1
            self._opened += 1
            session = OpenSession(
                key=key,
                key_source=source,
                revision=revision,
                first_seen=now,
                last_seen=now,
                partial=partial,
                order=self._opened,
                size_bytes=SESSION_BASE + getsizeof(key),
            )
            self.open_bytes += session.size_bytes
            self.open[key] = session
            self._deadlines.schedule(key, session.order, self._deadline(session))
            for old in earlier or ():
                self._retain(session, old)
        elif source and not session.key_source:
            session.key_source = source
        ident = (span.trace_id, span.span_id)  # `_retain`, inline: once per span
        seen = session.seen
        if ident in seen:
            self.duplicates += 1
            return
        seen.add(ident)
        session.spans.append(span)
        if keyless:
            self._keyless.setdefault(key, set()).add(span.trace_id)
        if size is None:
            size = estimate_size(span)
        session.size_bytes += size
        self.open_bytes += size
        earlier_seen = session.last_seen
        session.last_seen = now
        # A later deadline leaves the queued entry as a lower bound (re-checked when it comes
        # due); only a sooner one (a marker's grace, a clock that went back) is pushed. A later
        # `last_seen` alone only moves the deadline later: nothing to push.
        marker = span.attributes.get(_SESSION_END)
        # (`None in _END_VALUES` compares it with each one: most spans carry no marker)
        if marker is not None and marker in _END_VALUES:
            session.close_at = now + self.policy.end_grace_s
            session.close_reason = "end_marker"
        elif self._per_turn and span.parent_span_id is None:
            session.close_at = now + self.policy.turn_grace_s
            session.close_reason = "turn"
        elif now >= earlier_seen:
            return
        if session.close_at is not None and session.close_at > self.latest_close_at:
            self.latest_close_at = session.close_at
        self._deadlines.lower(key, self._deadline(session))

    def _deadline(self, session: OpenSession) -> float:
        """The earliest clock reading at which a close policy fires for ``session``."""
        deadline = session.last_seen + self.policy.idle_timeout_s
        max_age_s = self.policy.max_age_s
        if max_age_s is not None and session.first_seen + max_age_s < deadline:
            deadline = session.first_seen + max_age_s
        close_at = session.close_at
        if close_at is not None and close_at < deadline:
            deadline = close_at
        return deadline

    @property
    def memory_bytes(self) -> int:
        """What the memory budget counts: open sessions, key-less traces, retained spans."""
        return self.open_bytes + self.pending_bytes + self.retained_bytes

    def _forget_pending(self, trace_id: str) -> None:
        self.pending_bytes -= self._pending_bytes.pop(trace_id, 0)
        self._pending_since.pop(trace_id, None)
        self._pending_turn_end.pop(trace_id, None)
        self._pending_deadlines.discard(trace_id)

    def _retain(self, session: OpenSession, span: SpanRecord, size: int | None = None) -> bool:
        ident = (span.trace_id, span.span_id)
        if ident in session.seen:
            return False
        session.seen.add(ident)
        session.spans.append(span)
        if size is None:
            size = estimate_size(span)
        session.size_bytes += size
        self.open_bytes += size
        return True

    # --- closing ---

    def close(
        self, reason: CloseReason | None = None, *, limit: int | None = None
    ) -> list[ClosedSession]:
        """The one way sessions leave the store, at most ``limit`` at a time.

        Without ``reason``: the sessions whose close policy fired, plus evictions over the memory
        budget. With one (end of input, flush, shutdown): every open session and every key-less
        trace; a session whose own close already fired (end marker, turn end) and only waits out
        its grace period keeps that reason, so it stays complete.

        With ``limit``, the earliest opened go first and the rest stay open (the memory budget
        counts them) for the next call: `closing_left` says whether any are left.
        """
        if reason is None:
            return self._due(limit)
        out = [
            self._close(key, session.close_reason or reason)
            for key, session in list(islice(self.open.items(), limit))
        ]
        for trace_id in list(self._pending):
            if limit is not None and len(out) >= limit:
                return out
            ended = trace_id in self._pending_turn_end
            out.extend(self._close_pending(trace_id, "turn" if ended else reason))
        if not self.open:
            self._deadlines.clear()  # nothing is open or waiting any more
            self._overdue.clear()
            self._overdue_traces.clear()
            self._pending_deadlines.clear()
        return out

    @property
    def empty(self) -> bool:
        """No open session and no key-less trace waiting."""
        return not (self.open or self._pending)

    @property
    def overdue(self) -> int:
        """Sessions and key-less traces found due that a limited `close` left open (a few may
        have closed since)."""
        return len(self._overdue) + len(self._overdue_traces)

    def closing_left(self) -> bool:
        """Whether a limited `close` (without a reason) left work for the next: sessions or
        key-less traces found due, or more to evict over the memory budget."""
        return bool(self._overdue or self._overdue_traces) or self.over_budget

    @property
    def over_budget(self) -> bool:
        """Whether open sessions or key-less traces are to be evicted (retained spans of closed
        sessions go first, and cost no close)."""
        held = self.open_bytes + self.pending_bytes
        if held > self.policy.max_open_bytes and (self.open or self._pending):
            return True
        return len(self.open) > self.policy.max_open_sessions

    def closed_before(self) -> int | None:
        """Everything opened before this order and found due by the last `close()` has closed
        (None: everything found due has): the lowest order a limited close left due; 0 while
        evictions over the memory budget are left (no request is done with meanwhile)."""
        if self.over_budget:
            return 0
        orders = [order for order, _ in self._overdue] + [o for o, _ in self._overdue_traces]
        return min(orders, default=None)

    def _due(self, limit: int | None = None) -> list[ClosedSession]:
        now = self.due_checked_at = self.clock()
        policy = self.policy
        idle_s = policy.idle_timeout_s
        found = self._deadlines.pop_due(now)
        found.sort()  # in opening order, as a scan of `open` would find them
        overdue = self._overdue
        overdue.extend(found)
        found = self._pending_deadlines.pop_due(now)
        found.sort()
        overdue_traces = self._overdue_traces
        overdue_traces.extend(found)
        ready: list[ClosedSession] = []
        while overdue and (limit is None or len(ready) < limit):
            order, key = overdue.popleft()
            session = self.open.get(key)
            if session is None or session.order != order:  # closed (evicted) since it was due
                continue
            # The entry was a lower bound: spans since may have moved the deadline later.
            deadline = self._deadline(session)
            if now < deadline:
                self._deadlines.schedule(key, order, deadline)
                continue
            close_at = session.close_at
            # Fired: an end marker or turn end wins over idle, which wins over max age.
            reason: CloseReason
            if close_at is not None and now >= close_at and session.close_reason is not None:
                reason = session.close_reason
            elif now >= session.last_seen + idle_s:
                reason = "idle"
            else:
                reason = "max_age"
            ready.append(self._close(key, reason))
        while overdue_traces and (limit is None or len(ready) < limit):
            order, trace_id = overdue_traces.popleft()
            since = self._pending_since.get(trace_id)
            if since is None:  # it found its key, or closed, since it was due
                continue
            turn_end = self._pending_turn_end.get(trace_id)
            if turn_end is not None and now >= turn_end:
                ready.extend(self._close_pending(trace_id, "turn"))
            elif now - since >= idle_s:
                ready.extend(self._close_pending(trace_id, "idle"))
            else:  # within the lower bound's slack: not yet
                at = _lower_bound(since, idle_s)
                self._pending_deadlines.schedule(
                    trace_id, order, at if turn_end is None else min(at, turn_end)
                )
        ready.extend(self._evict_over_budget(None if limit is None else limit - len(ready)))
        return ready

    def _evict_over_budget(self, limit: int | None = None) -> list[ClosedSession]:
        """Retained spans, then sessions (at most ``limit``) until within the budget."""
        out: list[ClosedSession] = []
        budget = self.policy.max_open_bytes
        # Retained spans go first (a late span then re-opens its session as partial); then
        # the oldest open session or key-less trace, whichever began first.
        while self._closed_spans and self.memory_bytes > budget:
            self.retained_bytes -= self._closed_spans.popitem(last=False)[1][1]
        while (
            (self.open or self._pending)
            and self.memory_bytes > budget
            and (limit is None or len(out) < limit)
        ):
            oldest = next(iter(self.open.values()), None)
            trace_id = next(iter(self._pending_since), None)
            if trace_id is not None and (
                oldest is None or self._pending_since[trace_id] < oldest.first_seen
            ):
                out.extend(self._close_pending(trace_id, "evicted"))
            else:
                assert oldest is not None
                out.append(self._close(oldest.key, "evicted"))
            self.evicted += 1
        while len(self.open) > self.policy.max_open_sessions and (
            limit is None or len(out) < limit
        ):
            out.append(self._close(next(iter(self.open)), "evicted"))
            self.evicted += 1
        return out

    def _close_pending(self, trace_id: str, reason: CloseReason) -> list[ClosedSession]:
        spans = self._pending.pop(trace_id, [])
        self._forget_pending(trace_id)
        if not spans:
            return []
        now = self.clock()
        for span in spans:
            self._append(trace_id, TRACE_ID_SOURCE, span, now, keyless=True)
        self._remember_trace(trace_id, trace_id)
        return [self._close(trace_id, reason)]

    def _close(self, key: str, reason: CloseReason) -> ClosedSession:
        session = self.open.pop(key)
        self._deadlines.discard(key)
        self.open_bytes -= session.size_bytes
        spans = tuple(session.spans)
        found = self._keyless.pop(key, None)
        keyless = frozenset(found) if found else _NO_TRACES
        if self.policy.keep_closed_sessions > 0 and reason != "evicted":  # evicted for memory
            self._closed_spans[key] = (spans, session.size_bytes, keyless)
            self.retained_bytes += session.size_bytes
            while len(self._closed_spans) > self.policy.keep_closed_sessions:
                self.retained_bytes -= self._closed_spans.popitem(last=False)[1][1]
        self.revisions.closed(key, session.revision)
        if reason == "end_of_input" or reason == "shutdown":  # nothing more is coming
            trace_keys = self._trace_key
            for trace_id in {s.trace_id for s in spans}:
                if trace_keys.get(trace_id) == key:
                    del trace_keys[trace_id]
        return ClosedSession(
            key=key,
            key_source=session.key_source or TRACE_ID_SOURCE,
            revision=session.revision,
            reason=reason,
            spans=spans,
            partial=session.partial,
            keyless_traces=keyless,
        )


def _lower_bound(since: float, idle_s: float) -> float:
    """A reading no later than the first ``now`` with ``now - since >= idle_s``: ``since +
    idle_s`` rounds differently from that test by an ulp or so, and the test is what decides."""
    at = since + idle_s
    slack = 1e-9 * (abs(since) + abs(idle_s))
    return at - slack if slack < float("inf") else at
