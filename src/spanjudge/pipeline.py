"""spans -> sessions -> evaluation -> sinks: the one intake every front end feeds.

The processor, the sidecar and `spanjudge eval` each own one `Pipeline` and drive it from one
thread (it is not thread-safe, like the `SessionStore` inside it). spanjudge's own spans are
skipped here and nowhere else; sessions leave the store by its one `close` path; revisions that
must survive restarts and the record of evaluated sessions are kept here, for the front end that
confirms them (the sidecar's spool). Failures are contained: an engine or sink error is logged
once per kind, counted, and the remaining sessions and sinks still run.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

from spanjudge import semconv
from spanjudge.emit.base import Sink
from spanjudge.emit.plugins import EmitSettings, configured_sinks
from spanjudge.engine import Engine
from spanjudge.errors import ConfigError
from spanjudge.guard import Guard
from spanjudge.sessions.store import ClosedSession, CloseReason, SessionStore
from spanjudge.spans.record import SpanRecord
from spanjudge.trajectory.model import Trajectory
from spanjudge.values import SessionResult

if TYPE_CHECKING:  # offline runs record no telemetry: the metrics API is not imported for it
    from spanjudge.emit.metrics import SelfTelemetry

log = logging.getLogger("spanjudge")
_OWN_SCOPE_PREFIX = semconv.SJ_SCOPE_NAME + "."


def is_own_span(scope_name: str | None, span_name: str) -> bool:
    """Spans spanjudge (or its judges) emitted are never agent activity. Takes names, so the
    processor can ask before converting an SDK span."""
    scope = scope_name or ""
    return (
        scope == semconv.SJ_SCOPE_NAME
        or scope.startswith(_OWN_SCOPE_PREFIX)
        or span_name == semconv.SPAN_EVALUATE
    )


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


class RevisionLedger(Protocol):
    """Where evaluated revisions outlive the process (the sidecar's spool)."""

    def revision(self, key: str) -> int:
        """The last revision of session ``key`` recorded as evaluated, 0 if none."""
        ...


class Pipeline:
    """Feeds spans to the store, evaluates sessions as they close and hands results to sinks.

    With a ``ledger``, a closed session's revision is raised above every revision the ledger
    recorded or this pipeline handed out and not yet confirmed, so a session re-opened after a
    restart never reuses a verdict id; sessions evaluated and emitted are kept for
    `take_evaluated` until the owner confirms them with `confirmed`. With ``raise_errors`` an
    engine or sink error propagates (offline: a report must not silently lack a session).
    """

    def __init__(
        self,
        engine: Engine,
        store: SessionStore,
        sinks: Sequence[Sink],
        *,
        telemetry: SelfTelemetry | None = None,
        ledger: RevisionLedger | None = None,
        raise_errors: bool = False,
    ) -> None:
        self.engine = engine
        self.store = store
        self.sinks = [*sinks, *_plugin_sinks(engine)]
        self.telemetry = telemetry
        self.ledger = ledger
        self.raise_errors = raise_errors
        self.own_spans_skipped = 0
        self.guard = Guard(
            log, "spanjudge", on_error=telemetry.internal_error if telemetry is not None else None
        )
        self.non_agent_traces = 0
        self._in_flight: dict[str, int] = {}  # key -> revision evaluated, not yet confirmed
        self._evaluated: list[ClosedSession] = []
        if telemetry is not None:
            telemetry.set_open_sessions_callback(lambda: len(self.store.open))

    def add(self, spans: Iterable[SpanRecord]) -> int:
        """Take spans into their sessions, skipping spanjudge's own; returns the agent spans
        taken."""
        store = self.store
        n = 0
        for span in spans:
            if is_own_span(span.scope_name, span.name):
                self.own_spans_skipped += 1
                continue
            store.add(span)
            n += 1
        if self.telemetry is not None and n:
            self.telemetry.spans_received(n)
        return n

    def tick(self) -> list[SessionResult]:
        """Close the sessions whose policy fired, evaluate them, send the results to the sinks."""
        return self._evaluate(self.store.close())

    def close_all(self, reason: CloseReason) -> list[SessionResult]:
        """Close every open session (flush, shutdown, end of input) and evaluate it."""
        return self._evaluate(self.store.close(reason))

    def take_evaluated(self) -> list[ClosedSession]:
        """Sessions evaluated and handed to every sink since the last call (ledger only)."""
        done, self._evaluated = self._evaluated, []
        return done

    def confirmed(self, key: str, revision: int) -> None:
        """The ledger now records ``revision`` of ``key``: it no longer needs holding here."""
        if self._in_flight.get(key) == revision:
            del self._in_flight[key]

    def flush(self, timeout_s: float) -> bool:
        """Flush every sink within ``timeout_s`` overall."""
        deadline = time.monotonic() + max(0.0, timeout_s)
        ok = True
        for sink in self.sinks:
            try:
                ok = sink.flush(max(0.0, deadline - time.monotonic())) and ok
            except Exception:
                self._failed(f"flush:{type(sink).__name__}")
                ok = False
        return ok

    def shutdown(self) -> None:
        for sink in self.sinks:
            try:
                sink.shutdown()
            except Exception:
                self._failed(f"shutdown:{type(sink).__name__}")

    def _revise(self, session: ClosedSession) -> ClosedSession:
        assert self.ledger is not None
        floor = max(self.ledger.revision(session.key), self._in_flight.get(session.key, 0))
        if session.revision <= floor:
            session = replace(session, revision=floor + 1)
        self._in_flight[session.key] = session.revision
        return session

    def _evaluate(self, closed: Sequence[ClosedSession]) -> list[SessionResult]:
        results = []
        for session in closed:
            if self.ledger is not None:
                session = self._revise(session)
            try:
                trajectory = self.engine.trajectory(session)
                if not has_agent_activity(trajectory):
                    self._not_agent(session)
                    continue
                if self.telemetry is not None:
                    self.telemetry.session_closed(session_state(session))
                result = self.engine.evaluate(session, trajectory)
            except Exception:
                self._failed("evaluate")
                continue  # not recorded as evaluated: the ledger keeps its spans
            if self.telemetry is not None:
                self.telemetry.evaluation_duration(result.evaluation_duration_s)
            emitted = True
            for sink in self.sinks:
                try:
                    sink.emit(result)
                except Exception:
                    emitted = False
                    self._failed(f"emit:{type(sink).__name__}")
            if emitted and self.ledger is not None:
                self._evaluated.append(session)
            results.append(result)
        return results

    @property
    def errors(self) -> int:
        """Engine and sink failures contained so far (also `spanjudge.internal_errors`)."""
        return self.guard.errors

    def _not_agent(self, session: ClosedSession) -> None:
        """A health check or plain HTTP trace: counted apart, never judged, so it never lowers
        coverage; the ledger records it as done (nothing to emit, nothing left to keep)."""
        self.non_agent_traces += 1
        if self.telemetry is not None:
            self.telemetry.non_agent_trace()
        if self.ledger is not None:
            self._evaluated.append(session)

    def _failed(self, where: str) -> None:
        if self.raise_errors:
            raise
        self.guard.failed(where)
