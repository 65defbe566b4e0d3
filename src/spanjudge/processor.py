"""`SpanJudgeProcessor`: judge an agent in-process, from the spans it already emits.

Add it to the agent's `TracerProvider`, before the exporting processor, so that verdicts emitted
while the provider shuts down still reach the exporter:

    provider = TracerProvider()
    provider.add_span_processor(SpanJudgeProcessor(tracer_provider=provider))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))

`on_end` only appends the span to a deque that it keeps within ``max_queue_size`` (as cheap as
`BatchSpanProcessor.on_end`); a daemon worker thread converts, recognises, assembles and
evaluates. LLM-judged evaluators run on their judge's pool: the worker emits a session once its
judged verdicts are in (or past their deadline) and meanwhile carries on with the others.
Nothing here blocks the agent or raises into it: a full queue drops the span and counts it, an
internal error is logged once and counted.

Instrumentations that record message content as log records (the GenAI events) need the
records too: add `log_record_processor` to the agent's `LoggerProvider`
(`configure_opentelemetry` does). Its `on_emit` enqueues a record on the same queue; the worker
turns it into content of its span (`spans.logs`).
"""

from __future__ import annotations

import atexit
import collections
import logging
import os
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field

from opentelemetry import _logs, metrics, trace
from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY, Context, attach, detach, set_value
from opentelemetry.sdk._logs import LogRecordProcessor, ReadWriteLogRecord
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from spanjudge import semconv
from spanjudge.config import Config, load_config
from spanjudge.emit.base import Sink
from spanjudge.emit.console import NAME as CONSOLE
from spanjudge.emit.console import ConsoleSink, console_from_env
from spanjudge.emit.metrics import MetricsSink, SelfTelemetry
from spanjudge.emit.otel import OtelVerdictSink
from spanjudge.emit.plugins import EmitSettings
from spanjudge.engine import Engine
from spanjudge.guard import Guard
from spanjudge.pipeline import Pipeline, is_own_span
from spanjudge.sessions.store import SessionStore
from spanjudge.spans.record import SpanRecord
from spanjudge.spans.sdk import carriers_from_sdk, span_from_sdk

log = logging.getLogger("spanjudge")


@dataclass(slots=True)
class _Request:
    """A flush or shutdown asked of the worker; `done` is set when it has been served."""

    kind: str
    deadline: float
    done: threading.Event = field(default_factory=threading.Event)
    ok: bool = False


class SpanJudgeProcessor(SpanProcessor):
    """A `SpanProcessor` that evaluates agent sessions and emits the verdicts.

    ``config`` is a `Config`, a YAML path, or None for the embedded defaults. Verdicts go out
    through ``tracer_provider``, ``logger_provider`` and ``meter_provider`` (the global providers
    when not given), or through ``sinks`` when those are passed instead; ``console`` (default:
    the ``SPANJUDGE_CONSOLE`` variable) adds a line per session on stderr. Sessions close per
    the configuration's `sessions` policy; `force_flush` and `shutdown` evaluate every open
    session and mark it incomplete. With ``OTEL_SDK_DISABLED=true`` it does nothing, as the SDK.
    """

    def __init__(
        self,
        config: Config | str | os.PathLike[str] | None = None,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        logger_provider: _logs.LoggerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        max_queue_size: int = 20_000,
        max_batch_size: int = 512,
        tick_interval_s: float = 0.5,
        shutdown_timeout_s: float = 10.0,
        sinks: Sequence[Sink] | None = None,
        engine: Engine | None = None,
        shutdown_on_exit: bool = True,
        console: bool | None = None,
    ) -> None:
        if isinstance(config, (str, os.PathLike)):
            config = load_config(os.fspath(config))
        _check_arguments(
            config, max_queue_size, max_batch_size, tick_interval_s, shutdown_timeout_s
        )
        self.config = config or Config()
        self.engine = engine or Engine(self.config)
        self.telemetry = SelfTelemetry(meter_provider)
        if sinks is None:
            sinks = [
                OtelVerdictSink(tracer_provider=tracer_provider, logger_provider=logger_provider),
                MetricsSink(
                    meter_provider=meter_provider,
                    label_skills=self.config.label_skills,
                    label_agents=self.config.label_agents,
                    max_label_values=self.config.max_label_values,
                    series_ttl_s=self.config.series_ttl_s,
                ),
            ]
        if console is None:
            console = console_from_env()
        emit = self.config.sections.get("emit")
        if console and not (isinstance(emit, EmitSettings) and CONSOLE in emit.sinks):
            sinks = [*sinks, ConsoleSink()]
        self.pipeline = Pipeline(
            self.engine, SessionStore(self.config.policy), sinks, telemetry=self.telemetry
        )
        # A judged verdict coming in wakes the worker, which emits that session's result.
        self.pipeline.on_judged = lambda: self._wake.set()
        self._max_queue_size = max_queue_size
        self._max_batch_size = max_batch_size
        self._tick_interval_s = tick_interval_s
        self._shutdown_timeout_s = shutdown_timeout_s
        self._shutdown = False
        self._shutdown_done = threading.Event()  # later shutdown() callers wait on the first
        self._abandoned = False  # the shutdown gave up waiting: the worker stops after its step
        self.guard = Guard(log, "spanjudge processor", on_error=self.telemetry.internal_error)
        # The SDK's own switch: its providers then record nothing, and spanjudge runs nothing.
        self._disabled = os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"
        if self._disabled:
            self._shutdown = True
            self._shutdown_done.set()
            return
        self._start()
        if hasattr(os, "register_at_fork"):
            weak_reinit = weakref.WeakMethod(self._at_fork_reinit)

            def after_in_child() -> None:
                reinit = weak_reinit()
                if reinit is not None:
                    reinit()

            os.register_at_fork(after_in_child=after_in_child)
        if shutdown_on_exit:
            # Registered after the user's providers, so it runs before their own exit hooks:
            # sessions still open are evaluated while every provider can still export.
            weak_shutdown = weakref.WeakMethod(self.shutdown)

            def at_exit() -> None:
                shutdown = weak_shutdown()
                if shutdown is not None:
                    shutdown()

            atexit.register(at_exit)

    def _start(self) -> None:
        # No maxlen: a full deque would evict the oldest span silently. The length check in
        # on_end bounds it (give or take a span per racing thread) and counts every drop.
        self._queue: collections.deque[ReadableSpan | ReadWriteLogRecord] = collections.deque()
        self._requests: collections.deque[_Request] = collections.deque()
        self._wake = threading.Event()
        self._dropped = 0
        self._dropped_reported = 0
        self._dropped_logs = 0
        self._dropped_logs_reported = 0
        self._drop_lock = threading.Lock()
        self._pid = os.getpid()
        self._worker = threading.Thread(target=self._run, name="SpanJudgeWorker", daemon=True)
        self._worker.start()

    def _at_fork_reinit(self) -> None:
        # The parent evaluates the sessions it had open; the child starts empty.
        if self._shutdown:
            return
        self.pipeline.store = SessionStore(self.config.policy)
        self._start()

    # --- SpanProcessor: the agent's threads ---

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        """Nothing to do when a span starts."""

    def on_end(self, span: ReadableSpan) -> None:
        try:
            if self._shutdown:
                # Ended after shutdown: nobody will evaluate it; say so rather than lose it quietly
                # (our own evaluation spans, emitted while shutting down, are not agent spans).
                scope = span.instrumentation_scope
                if not self._disabled and not is_own_span(
                    scope.name if scope is not None else None, span.name
                ):
                    self.telemetry.spans_dropped(1, semconv.DROP_SHUTDOWN)
                return
            queue = self._queue
            if len(queue) >= self._max_queue_size:
                with self._drop_lock:  # the rare path: agent threads may race here
                    self._dropped += 1
                return
            queue.append(span)
            if len(queue) >= self._max_batch_size and not self._wake.is_set():
                self._wake.set()
        except Exception:
            self._internal_error("on_end")

    def on_emit_log(self, record: ReadWriteLogRecord) -> None:
        """`log_record_processor`'s `on_emit`: enqueue a log record as `on_end` a span."""
        try:
            scope = record.instrumentation_scope
            if scope is not None and is_own_span(scope.name, ""):
                return  # the verdicts spanjudge itself emits through the same provider
            if self._shutdown:
                # as a span ended after shutdown: nobody will read it; say so
                if not self._disabled:
                    self.telemetry.log_records_unread(1, semconv.DROP_SHUTDOWN)
                return
            queue = self._queue
            if len(queue) >= self._max_queue_size:
                with self._drop_lock:
                    self._dropped_logs += 1
                return
            queue.append(record)
            if len(queue) >= self._max_batch_size and not self._wake.is_set():
                self._wake.set()
        except Exception:
            self._internal_error("on_emit")

    @property
    def log_record_processor(self) -> SpanJudgeLogProcessor:
        """The `LogRecordProcessor` to add to the agent's `LoggerProvider`, so that content
        recorded as log records reaches this processor too."""
        return SpanJudgeLogProcessor(self)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Evaluate every pending span and open session (marked incomplete), then flush the
        sinks; False when that did not finish within ``timeout_millis``."""
        try:
            if self._disabled:
                return True
            if threading.current_thread() is self._worker:
                # A sink flushing the provider we are part of: the worker is already flushing.
                return True
            if self._shutdown:
                return False
            return self._ask("flush", timeout_millis / 1000)
        except Exception:
            self._internal_error("force_flush")
            return False

    def shutdown(self) -> None:
        """Evaluate what is pending (marked incomplete), flush and stop; idempotent, bounded by
        ``shutdown_timeout_s``."""
        try:
            if self._disabled:
                return
            if self._shutdown:
                if threading.current_thread() is not self._worker:
                    self._shutdown_done.wait(self._shutdown_timeout_s)
                return
            self._shutdown = True
            if threading.current_thread() is self._worker:
                return
            started = time.monotonic()
            self._ask("shutdown", self._shutdown_timeout_s)
            left = self._shutdown_timeout_s - (time.monotonic() - started)
            self._worker.join(max(0.0, left))
            if self._worker.is_alive():
                # Stuck in an evaluation: it must not carry on behind a returned shutdown.
                self._abandoned = True
                log.warning("spanjudge: shutdown timed out; open sessions are not evaluated")
        except Exception:
            self._internal_error("shutdown")
        finally:
            self._shutdown_done.set()

    def _ask(self, kind: str, timeout_s: float) -> bool:
        if not self._worker.is_alive():
            return False
        request = _Request(kind=kind, deadline=time.monotonic() + max(0.0, timeout_s))
        self._requests.append(request)
        self._wake.set()
        return request.done.wait(max(0.0, timeout_s)) and request.ok

    # --- the worker thread ---

    def _run(self) -> None:
        # Whatever spanjudge or its judges call (HTTP clients, model SDKs) must not be traced
        # as agent activity.
        token = attach(set_value(_SUPPRESS_INSTRUMENTATION_KEY, True))
        try:
            while not self._abandoned:
                self._wake.wait(self._tick_interval_s)
                self._wake.clear()
                try:
                    self._drain()
                    self.pipeline.tick()
                except BaseException:  # SystemExit from a plugin would end the thread silently
                    self._internal_error("worker")
                stop = False
                while self._requests and not self._abandoned:
                    request = self._requests.popleft()
                    stop = self._serve(request) or stop
                if stop:
                    return
        finally:
            detach(token)

    def _serve(self, request: _Request) -> bool:
        """Serve one flush/shutdown request; True when the worker should stop."""
        try:
            self._drain()
            now = time.monotonic()
            # Judgments still out get most of the budget; the sinks' flush keeps a fifth.
            until = now + 0.8 * max(0.0, request.deadline - now)
            self.pipeline.close_all("shutdown", until=until)
            request.ok = self.pipeline.flush(max(0.0, request.deadline - time.monotonic()))
            if request.kind == "shutdown":
                self.pipeline.shutdown()
        except BaseException:  # as in a tick: the thread must not end silently
            self._internal_error("worker")
            request.ok = False
        finally:
            request.done.set()
        return request.kind == "shutdown"

    def _drain(self) -> None:
        queue = self._queue
        records: list[SpanRecord] = []
        invalid = 0
        limits = self.config.limits
        while queue:
            item = queue.popleft()
            try:
                if isinstance(item, ReadableSpan):
                    records.append(span_from_sdk(item, limits))
                else:
                    decoded = carriers_from_sdk((item,), limits)
                    records.extend(decoded.carriers)
                    for reason, n in decoded.unread.items():
                        self.telemetry.log_records_unread(n, reason)
            except Exception:
                invalid += 1
            if len(records) >= self._max_batch_size:
                self.pipeline.add(records)
                records = []
        if records:
            self.pipeline.add(records)
        self.telemetry.spans_dropped(invalid, semconv.DROP_INVALID)
        dropped = self._dropped
        if dropped > self._dropped_reported:
            self.telemetry.spans_dropped(dropped - self._dropped_reported, semconv.DROP_QUEUE_FULL)
            self._dropped_reported = dropped
        dropped = self._dropped_logs
        if dropped > self._dropped_logs_reported:
            unread = dropped - self._dropped_logs_reported
            self.telemetry.log_records_unread(unread, semconv.DROP_QUEUE_FULL)
            self._dropped_logs_reported = dropped

    def _internal_error(self, where: str) -> None:
        # Never raise into the agent (except under the test suite); say it once, count each.
        self.guard.failed(where)

    @property
    def dropped_spans(self) -> int:
        """Spans dropped because the queue was full."""
        return self._dropped


class SpanJudgeLogProcessor(LogRecordProcessor):
    """The log side of a `SpanJudgeProcessor` (its `log_record_processor`): each record goes
    to the same queue as the spans. Flush and shutdown belong to the span processor: the
    `LoggerProvider` flushing or shutting down must not close the sessions."""

    def __init__(self, processor: SpanJudgeProcessor) -> None:
        self.processor = processor

    def on_emit(self, log_record: ReadWriteLogRecord) -> None:
        self.processor.on_emit_log(log_record)

    def shutdown(self) -> None:
        """The span processor's shutdown evaluates what is open; nothing to do here."""

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Queued records are taken with the spans; nothing to do here."""
        return True


def _check_arguments(
    config: object,
    max_queue_size: object,
    max_batch_size: object,
    tick_interval_s: object,
    shutdown_timeout_s: object,
) -> None:
    """Mistakes in how the processor is built fail at once, with the fix (never later, in the
    agent's threads)."""
    if config is not None and not isinstance(config, Config):
        raise TypeError(
            f"config must be a spanjudge Config, got {type(config).__name__}: "
            "pass a YAML path, spanjudge.config.load_config(path), or None for the defaults"
        )
    for name, value, low in (
        ("max_queue_size", max_queue_size, 1),
        ("max_batch_size", max_batch_size, 1),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    for name, value, floor in (
        ("tick_interval_s", tick_interval_s, 0.01),
        ("shutdown_timeout_s", shutdown_timeout_s, 0.0),
    ):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < floor:
            raise ValueError(f"{name} must be a number >= {floor}, got {value!r}")
