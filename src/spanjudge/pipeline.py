"""spans -> sessions -> evaluation -> sinks: the online loop the processor and the sidecar share.

One owner thread drives a `Pipeline` (it is not thread-safe, like the `SessionStore` inside it).
Failures are contained: an engine or sink error is logged once per kind, counted, and the
remaining sessions and sinks still run.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence

from spanjudge import semconv
from spanjudge.emit.base import Sink
from spanjudge.emit.metrics import SelfTelemetry
from spanjudge.engine import Engine
from spanjudge.recognition.registry import is_own_span
from spanjudge.sessions.store import ClosedSession, CloseReason, SessionStore
from spanjudge.spans.record import SpanRecord
from spanjudge.values import SessionResult

log = logging.getLogger("spanjudge")


def session_state(closed: ClosedSession) -> str:
    """`spanjudge.session.state` of a closed session: evaluated, incomplete or evicted."""
    if closed.reason == "evicted":
        return semconv.SESSION_STATE_EVICTED
    return semconv.SESSION_STATE_EVALUATED if closed.complete else semconv.SESSION_STATE_INCOMPLETE


class Pipeline:
    """Feeds spans to the store, evaluates sessions as they close and hands results to sinks."""

    def __init__(
        self,
        engine: Engine,
        store: SessionStore,
        sinks: Sequence[Sink],
        *,
        telemetry: SelfTelemetry | None = None,
    ) -> None:
        self.engine = engine
        self.store = store
        self.sinks = list(sinks)
        self.telemetry = telemetry
        self.own_spans_skipped = 0
        self.errors = 0
        self._warned: set[str] = set()
        if telemetry is not None:
            telemetry.set_open_sessions_callback(lambda: len(self.store.open))

    def add(self, spans: Iterable[SpanRecord]) -> int:
        """Take spans into their sessions; spanjudge's own spans are skipped. Returns the count
        of spans handed in."""
        store = self.store
        n = 0
        for span in spans:
            n += 1
            if is_own_span(span):
                self.own_spans_skipped += 1
                continue
            store.add(span)
        if self.telemetry is not None:
            self.telemetry.spans_received(n)
        return n

    def tick(self) -> list[SessionResult]:
        """Close the sessions whose policy fired, evaluate them, send the results to the sinks."""
        return self._evaluate(self.store.due())

    def close_all(self, reason: CloseReason) -> list[SessionResult]:
        """Close every open session (flush, shutdown, end of input) and evaluate it.

        A session whose own close already fired (end marker, turn end) and only waits out its
        grace period closes with that reason, so it stays complete.
        """
        closed = [
            self.store.close_key(key, session.close_reason)
            for key, session in list(self.store.open.items())
            if session.close_reason is not None
        ]
        done = [c for c in closed if c is not None]
        return self._evaluate([*done, *self.store.close_all(reason)])

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

    def _evaluate(self, closed: Sequence[ClosedSession]) -> list[SessionResult]:
        results = []
        for session in closed:
            if self.telemetry is not None:
                self.telemetry.session_closed(session_state(session))
            try:
                result = self.engine.evaluate(session)
            except Exception:
                self._failed("evaluate")
                continue
            if self.telemetry is not None:
                self.telemetry.evaluation_duration(result.evaluation_duration_s)
            for sink in self.sinks:
                try:
                    sink.emit(result)
                except Exception:
                    self._failed(f"emit:{type(sink).__name__}")
            results.append(result)
        return results

    def _failed(self, where: str) -> None:
        self.errors += 1
        if self.telemetry is not None:
            self.telemetry.internal_error(where)
        if where not in self._warned:
            self._warned.add(where)
            log.exception(
                "spanjudge %s failed (logged once, counted in %s)", where, semconv.M_INTERNAL_ERRORS
            )
