"""Verdicts as OTLP: the `spanjudge.evaluate` span with one event per verdict, and log records.

ARCHITECTURE.md section 8 (Contract). Ended agent spans are immutable, so verdicts go on a new
carrier span in the session's trace, parented to the last turn's root span and linked to the other
turns. The same verdicts are emitted as log records named `gen_ai.evaluation.result` that carry
the evaluated span's trace and span ids (OTel Logs API), so log backends can join them to traces.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from opentelemetry import _logs, trace
from opentelemetry._logs import SeverityNumber
from opentelemetry.context import Context
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, TraceFlags
from opentelemetry.util.types import AttributeValue

from spanjudge import semconv
from spanjudge._version import __version__
from spanjudge.trajectory.model import Trajectory
from spanjudge.values import SessionResult, Target, Verdict

_MAX_LINKS = 128  # the SDK's default span link limit; more turns than that keep the latest

log = logging.getLogger("spanjudge")
_SPAN_EVENT_LIMIT = 128  # the SDK default for events per span


# A verdict's attributes (section 8) in the order both builders write them: these, then its id
# (`Verdict.stable_id`), then its score when it has one, then those of `VERDICT_CLOSING` it has.
VERDICT_OPENING = (
    semconv.GEN_AI_EVALUATION_NAME,
    semconv.GEN_AI_EVALUATION_SCORE_LABEL,
    semconv.GEN_AI_EVALUATION_EXPLANATION,
    semconv.SJ_OUTCOME,
    semconv.SJ_JUDGE,
)
VERDICT_CLOSING = (semconv.SJ_REASON, semconv.GEN_AI_SKILL_NAME, semconv.ERROR_TYPE)


def verdict_texts(verdict: Verdict) -> tuple[Any, ...]:
    """The values of a verdict's `VERDICT_OPENING` and then `VERDICT_CLOSING` attributes, ""
    for a closing one it does not have (left out)."""
    return (
        verdict.evaluator,
        verdict.label,
        verdict.explanation,
        verdict.outcome,
        verdict.judge,
        verdict.reason or "",
        verdict.target.skill or "",
        verdict.error_type or "",
    )


def verdict_attributes(
    verdict: Verdict, session_id: str, revision: int
) -> dict[str, AttributeValue]:
    """The attributes of one `gen_ai.evaluation.result` event or log record (section 8)."""
    texts = verdict_texts(verdict)
    opening, closing = texts[: len(VERDICT_OPENING)], texts[len(VERDICT_OPENING) :]
    attrs: dict[str, AttributeValue] = dict(zip(VERDICT_OPENING, opening, strict=True))
    attrs[semconv.SJ_VERDICT_ID] = verdict.stable_id(session_id, revision)
    if verdict.score is not None:
        attrs[semconv.GEN_AI_EVALUATION_SCORE_VALUE] = float(verdict.score)
    for key, value in zip(VERDICT_CLOSING, closing, strict=True):
        if value:
            attrs[key] = value
    return attrs


def evaluation_span_attributes(trajectory: Trajectory) -> dict[str, AttributeValue]:
    """The attributes of a session's `spanjudge.evaluate` span (section 8)."""
    attrs: dict[str, AttributeValue] = {
        semconv.SESSION_ID: trajectory.session_id,
        semconv.SJ_REVISION: trajectory.revision,
        semconv.SJ_SESSION_COMPLETE: trajectory.complete,
    }
    if trajectory.agent_name:
        attrs[semconv.GEN_AI_AGENT_NAME] = trajectory.agent_name
    return attrs


def session_record_attributes(trajectory: Trajectory) -> dict[str, AttributeValue]:
    """What a verdict's log record carries after its event's attributes (`log_record_attributes`):
    the session id and revision, which the span event has from its span."""
    return {semconv.SESSION_ID: trajectory.session_id, semconv.SJ_REVISION: trajectory.revision}


def log_record_attributes(
    event_attributes: Mapping[str, AttributeValue], trajectory: Trajectory
) -> dict[str, AttributeValue]:
    """A verdict's log record attributes: its event's, then the session's."""
    return {**event_attributes, **session_record_attributes(trajectory)}


def failed(verdict: Verdict) -> bool:
    """Whether a verdict's log record is a warning (severity WARN) rather than INFO."""
    return verdict.outcome == "fail"


def evaluation_times(result: SessionResult) -> tuple[int, int]:
    """The evaluation span's start and end (Unix ns): it ends now, having lasted the evaluation;
    its events and log records carry the end."""
    end_ns = time.time_ns()
    return end_ns - int(max(0.0, result.evaluation_duration_s) * 1e9), end_ns


def warn_event_limit(verdicts: int, limit: int) -> None:
    """Say (once per sink: the caller keeps the flag) that a span keeps only ``limit`` events."""
    log.warning(
        "spanjudge: %d verdicts on one evaluation span; the SDK keeps at most %d span "
        "events by default (OTEL_SPAN_EVENT_COUNT_LIMIT); the log records carry them all",
        verdicts,
        limit,
    )


def span_ids(ids: tuple[str, str]) -> tuple[int, int] | None:
    """A (trace id, span id) pair of hex strings as integers; None unless both are valid ids."""
    try:
        trace_id, span_id = int(ids[0], 16), int(ids[1], 16)
    except ValueError:
        return None
    if not 0 < trace_id < 1 << 128 or not 0 < span_id < 1 << 64:
        return None
    return trace_id, span_id


def _context_of(ids: tuple[str, str] | None) -> Context | None:
    if ids is None:
        return None
    span_context = _span_context(ids)
    return trace.set_span_in_context(NonRecordingSpan(span_context)) if span_context else None


def _span_context(ids: tuple[str, str]) -> SpanContext | None:
    numbers = span_ids(ids)
    if numbers is None:
        return None
    return SpanContext(
        trace_id=numbers[0],
        span_id=numbers[1],
        is_remote=False,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )


class Placement:
    """Where a session's evaluation goes: the parent span, the linked turns, evaluated spans."""

    def __init__(self, trajectory: Trajectory) -> None:
        self.trajectory = trajectory
        turns = trajectory.turns
        self.parent: tuple[str, str] | None = None
        if turns:
            last = turns[-1]
            self.parent = (last.trace_id, last.span_id)
        elif trajectory.steps:
            # No recognised turn: hang it under the latest step so it stays in the session's trace.
            latest = max(trajectory.steps, key=lambda s: s.end_unix_nano)
            self.parent = (latest.trace_id, latest.span_id)
        self.links = [(t.trace_id, t.span_id) for t in turns[:-1]][-_MAX_LINKS:]
        # step span id -> its trace id, built when a verdict first targets a span (most are
        # about the whole session or a turn)
        self._step_trace: Mapping[str, str] | None = None

    def evaluated_span(self, target: Target) -> tuple[str, str] | None:
        """The span a verdict of ``target`` is about: its target span, else its turn, else the
        last turn."""
        if target.span_id:
            step_trace = self._step_trace
            if step_trace is None:
                steps = self.trajectory.steps
                step_trace = self._step_trace = {s.span_id: s.trace_id for s in steps}
            if target.span_id in step_trace:
                return (step_trace[target.span_id], target.span_id)
        turns = self.trajectory.turns
        if target.turn is not None and 0 <= target.turn < len(turns):
            turn = turns[target.turn]
            return (turn.trace_id, turn.span_id)
        return self.parent


class OtelVerdictSink:
    """Emits each evaluated session as a `spanjudge.evaluate` span and log records.

    Uses the providers passed in, else the global ones (looked up at first emission, so a
    processor created before `set_tracer_provider` still finds the provider). The tracer's
    instrumentation scope is `spanjudge`, which is how recognition skips these spans.
    """

    def __init__(self, tracer_provider: Any = None, logger_provider: Any = None) -> None:
        self._tracer_provider = tracer_provider
        self._logger_provider = logger_provider
        self._tracer: trace.Tracer | None = None
        self._logger: _logs.Logger | None = None
        self._closed = False
        self._warned_no_provider = False
        self._warned_event_limit = False

    def _get_tracer(self) -> trace.Tracer:
        if self._tracer is None:
            provider = self._tracer_provider or trace.get_tracer_provider()
            self._tracer = provider.get_tracer(semconv.SJ_SCOPE_NAME, __version__)
        return self._tracer

    def _get_logger(self) -> _logs.Logger:
        if self._logger is None:
            provider = self._logger_provider or _logs.get_logger_provider()
            self._logger = provider.get_logger(semconv.SJ_SCOPE_NAME, __version__)
        return self._logger

    def emit(self, result: SessionResult) -> None:
        if self._closed:
            return
        trajectory = result.trajectory
        placement = Placement(trajectory)
        links = [
            Link(ctx) for ctx in (_span_context(ids) for ids in placement.links) if ctx is not None
        ]
        start_ns, end_ns = evaluation_times(result)
        span = self._get_tracer().start_span(
            semconv.SPAN_EVALUATE,
            context=_context_of(placement.parent) or Context(),
            links=links,
            attributes=evaluation_span_attributes(trajectory),
            start_time=start_ns,
        )
        if not span.is_recording() and not self._warned_no_provider:
            # Verdicts that go nowhere, silently, would look like an agent with no problems.
            self._warned_no_provider = True
            # Only an SDK LoggerProvider (not the API's no-op or an unset proxy) sends records.
            logs = self._logger_provider or _logs.get_logger_provider()
            fallback = (
                "the log records still carry the verdicts"
                if hasattr(logs, "add_log_record_processor")
                else "there is no SDK LoggerProvider either (pass logger_provider= or set a "
                "global one), so the verdicts reach no exporter: only metrics, if a "
                "MeterProvider is set, count them"
            )
            log.warning(
                "spanjudge: an evaluation span was not recorded (no SDK tracer provider, or its "
                "sampler dropped it): pass tracer_provider= to SpanJudgeProcessor or set a "
                "global SDK TracerProvider; %s",
                fallback,
            )
        if len(result.verdicts) > _SPAN_EVENT_LIMIT and not self._warned_event_limit:
            self._warned_event_limit = True
            warn_event_limit(len(result.verdicts), _SPAN_EVENT_LIMIT)
        logger = self._get_logger()
        # A session's verdicts are about a few spans (most about its last turn): one context
        # for each of those, not one per verdict.
        contexts: dict[tuple[str, str] | None, Context] = {}
        for verdict in result.verdicts:
            attrs = verdict_attributes(verdict, trajectory.session_id, trajectory.revision)
            span.add_event(semconv.EV_EVALUATION_RESULT, attrs, timestamp=end_ns)
            evaluated = placement.evaluated_span(verdict.target)
            context = contexts.get(evaluated)
            if context is None:
                context = contexts[evaluated] = _context_of(evaluated) or Context()
            logger.emit(
                timestamp=end_ns,
                observed_timestamp=end_ns,
                context=context,
                severity_number=SeverityNumber.WARN if failed(verdict) else SeverityNumber.INFO,
                severity_text="WARN" if failed(verdict) else "INFO",
                event_name=semconv.EV_EVALUATION_RESULT,
                attributes=log_record_attributes(attrs, trajectory),
            )
        span.end(end_time=end_ns)

    def flush(self, timeout_s: float) -> bool:
        """Flush the providers' processors (the SDK ones have `force_flush`; proxies do not)."""
        deadline = time.monotonic() + max(0.0, timeout_s)
        ok = True
        for provider in (
            self._tracer_provider or trace.get_tracer_provider(),
            self._logger_provider or _logs.get_logger_provider(),
        ):
            flush = getattr(provider, "force_flush", None)
            if flush is None:
                continue
            left_ms = max(0, int((deadline - time.monotonic()) * 1000))
            ok = bool(flush(left_ms)) and ok
        return ok

    def shutdown(self) -> None:
        """Stop emitting. The providers belong to the user and are left running."""
        self._closed = True
