"""spans -> sessions -> evaluation -> sinks: the one intake every front end feeds.

The processor, the sidecar and `spanjudge eval` each own one `Pipeline` and drive it from one
thread (it is not thread-safe, like the `SessionStore` inside it). spanjudge's own spans are
skipped here and nowhere else; sessions leave the store by its one `close` path; the store's
revision ledger (`sessions.revisions`) is told which sessions went to evaluation and which were
emitted, for the front end that confirms them (the sidecar's spool). Failures are contained: an
engine or sink error is logged once per kind, counted, and the remaining sessions and sinks
still run.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from spanjudge import semconv
from spanjudge.emit.plugins import EmitSettings, configured_sinks
from spanjudge.engine import Engine, PendingResult
from spanjudge.errors import ConfigError
from spanjudge.guard import Guard
from spanjudge.sessions.store import ClosedSession, SessionStore
from spanjudge.spans.record import SpanRecord
from spanjudge.trajectory.model import Trajectory
from spanjudge.values import SessionResult

if TYPE_CHECKING:  # offline runs record no telemetry: the metrics API is not imported for it
    from spanjudge.emit.base import Sink
    from spanjudge.emit.metrics import SelfTelemetry
    from spanjudge.sessions.store import CloseReason


_OWN_SCOPE_PREFIX = semconv.SJ_SCOPE_NAME + "."
# Sessions evaluated whose judged verdicts are still out: each holds its trajectory in memory.
MAX_PENDING_SESSIONS = 1_000

# The young generation's collection threshold while a pipeline runs (`eval`, and every process of
# serve's own): allocations between collections. Spans and their attribute dicts live until their
# session closes, so at the default threshold (700) the collector runs every few dozen spans and
# its middle generation re-traverses them again and again; cycles are rare
# (`bench/bench_collector.py` with `--profile` shows what collection costs).
GC_THRESHOLD = 50_000


def collect_less() -> tuple[int, int, int]:
    """Raise the process's young-generation threshold to `GC_THRESHOLD` (collection left off if
    it is off); returns the thresholds it found, for a caller that puts them back."""
    found = gc.get_threshold()
    if found[0]:
        gc.set_threshold(max(found[0], GC_THRESHOLD), *found[1:])
    return found


def is_own_span(scope_name: str | None, span_name: str) -> bool:
    """Spans spanjudge (or its judges) emitted are never agent activity. Takes names, so the
    processor can ask before converting an SDK span."""
    scope = scope_name or ""
    return (
        scope == semconv.SJ_SCOPE_NAME
        or scope.startswith(_OWN_SCOPE_PREFIX)
        or span_name == semconv.SPAN_EVALUATE
    )


def agent_spans(
    spans: Sequence[SpanRecord], sizes: Sequence[int] | None = None
) -> tuple[Sequence[SpanRecord], Sequence[int] | None]:
    """``spans`` without spanjudge's own, with the ``sizes`` of those kept (None when not given
    or when some were left out: the store then works them out)."""
    # Usually none is: each distinct scope name (a request's spans share a few) is looked at
    # once, and the names compared in one pass, before any span is asked `is_own_span`.
    scopes = {span.scope_name for span in spans}
    if semconv.SPAN_EVALUATE not in [span.name for span in spans] and not any(
        is_own_span(scope, "") for scope in scopes
    ):
        return spans, sizes
    return [span for span in spans if not is_own_span(span.scope_name, span.name)], None


class EventClock:
    """Offline time is event time: the latest end of an agent span taken so far, in seconds.

    Given to a `Pipeline` (and its store), it moves as the pipeline takes spans; spanjudge's own
    evaluation spans, recorded after their session, never move it."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def has_agent_activity(trajectory: Trajectory) -> bool:
    """Whether recognition found anything an agent did: a step or a turn. (The agent name is
    no evidence: it falls back to `service.name`, which every trace has.)"""
    return bool(trajectory.steps or trajectory.turns)


def session_state(closed: ClosedSession) -> str:
    """`spanjudge.session.state` of a closed session: evaluated, incomplete or evicted."""
    if closed.reason == "evicted":
        return semconv.SESSION_STATE_EVICTED
    return semconv.SESSION_STATE_EVALUATED if closed.complete else semconv.SESSION_STATE_INCOMPLETE


def _plugin_sinks(engine: Engine) -> list[Sink]:
    """The third-party sinks the configuration's ``emit.sinks`` names."""
    settings = engine.config.sections.get("emit")
    if not isinstance(settings, EmitSettings):
        return []
    problems: list[str] = []
    built = configured_sinks(settings, problems)
    if problems:
        raise ConfigError(problems, source=engine.config.source)
    return built


@dataclass(frozen=True, slots=True, kw_only=True)
class _Pending:
    session: ClosedSession
    result: PendingResult
    mark: int


class Pipeline:
    """Feeds spans to the store, evaluates sessions as they close and hands results to sinks.

    Each session closed is reported to the store's revision ledger as it goes to evaluation, and
    again once every sink took its result, for an owner that confirms (`Revisions.confirm`).
    With ``raise_errors`` an
    engine or sink error propagates (offline: a report must not silently lack a session). With
    an ``event_clock`` (the store's clock, offline), time moves with the agent spans taken.

    A session's deterministic verdicts are in when it closes; its judged ones run on their
    judges' pools, and its result goes to the sinks from a later `tick` once they are in or
    their deadline passed, so a slow judge never holds up another session (nor intake). With
    ``ordered`` results leave in the order their sessions closed (a report that does not
    depend on judge timing); at most ``max_pending`` sessions wait, beyond that the oldest is
    waited for (the backpressure a slow judge exerts, bounded by its deadline).
    """

    def __init__(
        self,
        engine: Engine,
        store: SessionStore,
        sinks: Sequence[Sink],
        *,
        telemetry: SelfTelemetry | None = None,
        event_clock: EventClock | None = None,
        raise_errors: bool = False,
        ordered: bool = False,
        max_pending: int = MAX_PENDING_SESSIONS,
    ) -> None:
        self.engine = engine
        self.store = store
        self.sinks = [*sinks, *_plugin_sinks(engine)]
        self.telemetry = telemetry
        self.event_clock = event_clock
        self.raise_errors = raise_errors
        self.guard = Guard(
            "spanjudge",
            "spanjudge",
            on_error=telemetry.internal_error if telemetry is not None else None,
        )
        self.non_agent_traces = 0
        # log records whose span never reached their session, over every evaluation
        self.log_records_unjoined = 0
        self._pending: list[_Pending] = []  # evaluations started, results not yet emitted
        self.ordered = ordered
        self.max_pending = max_pending
        # Called from a judge's thread when a judged verdict is in: the owner wakes its loop.
        self.on_judged: Callable[[], None] | None = None
        if telemetry is not None:
            telemetry.set_open_sessions_callback(lambda: len(self.store.open))

    def add(
        self,
        spans: Sequence[SpanRecord],
        sizes: Sequence[int] | None = None,
        *,
        agent_only: bool = False,
        keys: Sequence[tuple[str, str] | None] | None = None,
        refused: int = 0,
    ) -> int:
        """Take spans into their sessions, skipping spanjudge's own; returns the agent spans
        taken. ``sizes``: each span's `estimate_size`, when the decoder worked them out;
        ``agent_only``: the caller left spanjudge's own out already (`agent_spans`); ``keys``:
        each span's `session_key` with the store's key attributes, when the caller looked them
        up (for agent spans only: it implies ``agent_only``), and ``refused`` the key attributes
        it skipped."""
        if not agent_only and keys is None:
            spans, sizes = agent_spans(spans, sizes)
        clock = self.event_clock
        if clock is not None and spans:  # before the store takes them: seen "now"
            latest = max(span.end_unix_nano for span in spans) / 1e9
            if latest > clock.now:
                clock.now = latest
        store = self.store
        before = store.refused_keys
        if keys is not None:
            store.refused_keys += refused
            if sizes is None:
                for span, found in zip(spans, keys, strict=True):
                    store.add(span, found=found, looked_up=True)
            else:
                for span, size, found in zip(spans, sizes, keys, strict=True):
                    store.add(span, size, found=found, looked_up=True)
        elif sizes is None:
            for span in spans:
                store.add(span)
        else:
            for span, size in zip(spans, sizes, strict=True):
                store.add(span, size)
        n = len(spans)
        if self.telemetry is not None and n:
            self.telemetry.spans_received(n)
            self.telemetry.session_keys_refused(store.refused_keys - before)
        return n

    def tick(self, *, mark: int = 0, limit: int | None = None) -> list[SessionResult]:
        """Close the sessions whose policy fired (at most ``limit``: the store keeps the rest
        for the next tick) and start their evaluation; send the results whose judged verdicts
        are in (or past their deadline) to the sinks. ``mark`` is kept with each session closed
        now and handed back by `take_evaluated`."""
        self._start(self.store.close(limit=limit), mark)
        return self._emit(wait=False)

    def close_all(
        self,
        reason: CloseReason,
        *,
        until: float | None = None,
        mark: int = 0,
        limit: int | None = None,
    ) -> list[SessionResult]:
        """Close every open session (flush, shutdown, end of input; at most ``limit``, the
        earliest opened, the rest stay open), evaluate it and every evaluation still pending;
        judged verdicts not in by their deadline or by ``until`` (a `time.monotonic` time) are
        `judge_timeout`."""
        self._start(self.store.close(reason, limit=limit), mark)
        return self.drain(until=until)

    def drain(self, *, until: float | None = None) -> list[SessionResult]:
        """Emit every pending evaluation, waiting for judged verdicts until their deadline or
        ``until``; those not in by then are `judge_timeout`."""
        return self._emit(wait=True, until=until)

    @property
    def pending(self) -> int:
        """Sessions whose evaluation started and whose result is not emitted yet."""
        return len(self._pending)

    def flush(self, timeout_s: float) -> bool:
        """Flush every sink within ``timeout_s`` overall."""
        deadline = time.monotonic() + max(0.0, timeout_s)
        ok = True
        if self.telemetry is not None:
            self.telemetry.flush()  # what a batching telemetry holds goes with the sinks'
        for sink in self.sinks:
            try:
                ok = sink.flush(max(0.0, deadline - time.monotonic())) and ok
            except KeyboardInterrupt:
                raise
            except BaseException:  # SystemExit from a plugin sink is a bug like any other
                self._failed(f"flush:{type(sink).__name__}")
                ok = False
        return ok

    def shutdown(self) -> None:
        if self.telemetry is not None:
            self.telemetry.flush()
        for sink in self.sinks:
            try:
                sink.shutdown()
            except KeyboardInterrupt:
                raise
            except BaseException:
                self._failed(f"shutdown:{type(sink).__name__}")

    def _start(self, closed: Sequence[ClosedSession], mark: int) -> None:
        revisions = self.store.revisions
        for session in closed:
            revisions.started(session)
            try:
                trajectory = self.engine.trajectory(session)
                if trajectory.log_records_unjoined:
                    self._unjoined(trajectory.log_records_unjoined)
                if not has_agent_activity(trajectory):
                    self._not_agent(session, mark)
                    continue
                if self.telemetry is not None:
                    self.telemetry.session_closed(session_state(session))
                started = self.engine.begin(session, trajectory, on_judged=self.on_judged)
            except Exception:
                self._failed("evaluate")
                revisions.failed(session)  # not evaluated: the spool keeps its spans
                continue
            self._pending.append(_Pending(session=session, result=started, mark=mark))
        while len(self._pending) > self.max_pending:  # memory bound: the oldest waits now
            self._finish(self._pending.pop(0), None)

    def _unjoined(self, n: int) -> None:
        self.log_records_unjoined += n
        if self.telemetry is not None:
            self.telemetry.log_records_unread(n, semconv.LOG_UNREAD_SPAN_NOT_SEEN)

    def _emit(self, *, wait: bool, until: float | None = None) -> list[SessionResult]:
        """Emit the pending results that are ready (all of them with ``wait``), in the order
        their sessions closed when ``ordered``."""
        results: list[SessionResult] = []
        waiting: list[_Pending] = []
        for item in self._pending:
            if wait or (item.result.ready() and not (self.ordered and waiting)):
                result = self._finish(item, until)
                if result is not None:
                    results.append(result)
            else:
                waiting.append(item)
        self._pending = waiting
        return results

    def _finish(self, item: _Pending, until: float | None) -> SessionResult | None:
        try:
            result = item.result.result(until=until)
        except Exception:
            self._failed("evaluate")
            self.store.revisions.failed(item.session)  # the spool keeps its spans
            return None
        if self.telemetry is not None:
            self.telemetry.evaluation_duration(result.evaluation_duration_s)
        emitted = True
        for sink in self.sinks:
            try:
                sink.emit(result)
            except KeyboardInterrupt:
                raise
            except BaseException:  # a plugin's SystemExit must not end the worker thread
                emitted = False
                self._failed(f"emit:{type(sink).__name__}")
        if emitted:
            self.store.revisions.evaluated(item.session, item.mark)
        else:
            self.store.revisions.failed(item.session)
        return result

    @property
    def errors(self) -> int:
        """Engine and sink failures contained so far (also `spanjudge.internal_errors`)."""
        return self.guard.errors

    def _not_agent(self, session: ClosedSession, mark: int) -> None:
        """A health check or plain HTTP trace: counted apart, never judged, so it never lowers
        coverage; the revision ledger has it as evaluated (nothing to emit, nothing to keep)."""
        self.non_agent_traces += 1
        if self.telemetry is not None:
            self.telemetry.non_agent_trace()
        self.store.revisions.evaluated(session, mark)

    def _failed(self, where: str) -> None:
        if self.raise_errors:
            raise
        self.guard.failed(where)
