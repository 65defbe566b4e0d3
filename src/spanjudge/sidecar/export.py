"""Verdict export over OTLP with confirmation: the spool forgets a session only once its evaluation
span and log records were accepted by the configured endpoint.

The SDK's batch processors report success from `force_flush` even when the export failed, so
the sidecar uses a small processor of its own: spans (and log records) wait in a bounded list;
`force_flush` exports them in batches and returns True only when every batch was accepted; a
failed batch stays queued for the next flush. The OTLP exporters retry transient failures
themselves within their timeout.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY, attach, detach, set_value
from opentelemetry.sdk._logs import LoggerProvider, LogRecordProcessor
from opentelemetry.sdk._logs.export import LogRecordExportResult
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExportResult

from spanjudge.guard import Guard
from spanjudge.sidecar.config import ExportConfig, env_endpoint
from spanjudge.sidecar.export_health import ExportHealth, export_health, exporting

log = logging.getLogger("spanjudge.sidecar")
_BATCH = 512


def endpoint_failure(exc: BaseException) -> bool:
    """Whether an exception from an OTLP exporter is the endpoint's (network, TLS, timeout, an
    RPC status): retried and backpressured, not a bug. Anything else is an internal error."""
    if isinstance(exc, (OSError, TimeoutError)):  # requests' errors are OSErrors too
        return True
    try:
        import grpc
    except ImportError:  # pragma: no cover - grpcio is a dependency
        return False
    return isinstance(exc, grpc.RpcError)


class _Confirming:
    """The items exported on `flush`; failures stay for the next attempt.

    Never dropped, however long the list gets: the spool releases a session once its flush
    succeeded, so a dropped item would be a verdict lost for good. The list is kept short by
    the worker instead, which stops evaluating (and receivers refuse new requests, retryable)
    while `VerdictExport.full` holds; one tick can still overshoot by the sessions it closes.

    An exporter that raises keeps its batch queued either way: an endpoint failure (see
    `endpoint_failure`) is retried, and said once per outage by ``health`` (as a failed call
    is); anything else is a bug, handed to ``guard`` (logged once, counted, re-raised under
    the test suite).
    """

    def __init__(
        self,
        export: Callable[[Sequence[Any]], bool],
        guard: Guard,
        aborted: Callable[[], bool] = lambda: False,
        health: tuple[ExportHealth, str] | None = None,
    ) -> None:
        self._export = export
        self._guard = guard
        self._aborted = aborted
        self._health, self._signal = health or (export_health(ExportConfig()), "verdicts")
        self._items: list[Any] = []
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()

    def add(self, item: Any) -> None:
        with self._lock:
            self._items.append(item)

    @property
    def backlog(self) -> int:
        return len(self._items)

    def flush(self) -> bool:
        with self._flush_lock:
            with self._lock:
                items, self._items = self._items, []
            sent = 0
            token = attach(set_value(_SUPPRESS_INSTRUMENTATION_KEY, True))
            try:
                while sent < len(items):
                    batch = items[sent : sent + _BATCH]
                    if not self._export_one(batch):
                        break
                    sent += len(batch)
            finally:
                detach(token)
                if sent < len(items):  # kept, even when a bug is re-raised under the tests
                    with self._lock:
                        self._items = items[sent:] + self._items
            return sent == len(items)

    def _export_one(self, batch: Sequence[Any]) -> bool:
        try:
            with exporting(self._health):
                ok = self._export(batch)
        except Exception as exc:
            if self._aborted():  # shut down under a call in flight (gRPC: "closed channel")
                return False
            if not endpoint_failure(exc):
                self._guard.failed("verdict export")
                return False
            self._health.result(self._signal, False, exc)
            return False
        self._health.result(self._signal, ok)
        return ok


# An export call's time budget grows to at most this many times the configured one.
MAX_TIMEOUT_FACTOR = 8
_TIMED_OUT = 0.9  # a failed call that used this share of its time ran out of it
_DECAY = 0.8  # each success lets the slowest recent latency fade by this factor
_PROBE_S = 1.0  # at most this long to see whether the endpoint takes connections


class ExportTimeout:
    """The time an export call to one endpoint may take, following its observed latency.

    A slow endpoint that still answers would otherwise have each call cut at the configured
    timeout just before its answer, and the same items sent again: it receives everything
    twice and does twice the work. So a failed call that used (nearly) all of its time doubles
    the next calls' time, up to `MAX_TIMEOUT_FACTOR` times the configured figure, when the
    endpoint still takes connections (``answers``: up, only slow); and after a success the time
    is the configured figure doubled as often as it takes to be at least twice the slowest
    recent latency (which fades with each success, so a fast endpoint brings it back down).
    Any other failure changes nothing: an endpoint that refuses connections, or lets them go
    unanswered, makes calls that use all of their time too (the exporters retry until it runs
    out), and more time would only hold export longer.
    """

    def __init__(self, configured_s: float, answers: Callable[[], bool]) -> None:
        self.configured_s = configured_s
        self._answers = answers
        self._factor = 1
        self._latency_s = 0.0
        self._lock = threading.Lock()

    @property
    def seconds(self) -> float:
        return self.configured_s * self._factor

    def took(self, seconds: float, ok: bool, budget_s: float) -> None:
        """A call given ``budget_s`` ended after ``seconds``, accepted or not."""
        if not ok and (seconds < _TIMED_OUT * budget_s or not self._answers()):
            return
        with self._lock:
            if ok:
                self._latency_s = max(seconds, _DECAY * self._latency_s)
                factor = 1
                while factor < MAX_TIMEOUT_FACTOR and self.configured_s * factor < (
                    2 * self._latency_s
                ):
                    factor *= 2
            else:
                factor = min(MAX_TIMEOUT_FACTOR, 2 * self._factor)
            if factor != self._factor:
                log.info(
                    "verdict export: calls now get %.3gs (the endpoint took %.3gs; configured"
                    " timeout %.3gs)",
                    self.configured_s * factor,
                    seconds,
                    self.configured_s,
                )
            self._factor = factor


def takes_connections(address: tuple[str, int] | None, timeout_s: float) -> bool:
    """Whether ``address`` accepts a TCP connection within ``timeout_s`` (False if unknown)."""
    if address is None:
        return False
    try:
        with socket.create_connection(address, timeout=timeout_s):
            return True
    except OSError:
        return False


def endpoint_address(config: ExportConfig) -> tuple[str, int] | None:
    """The host and port the exporters connect to (None when that cannot be told)."""
    endpoint = config.endpoint or env_endpoint()
    if endpoint is None:
        endpoint = "localhost:4317" if config.protocol == "grpc" else "http://localhost:4318"
    parts = urllib.parse.urlsplit(endpoint if "//" in endpoint else "//" + endpoint)
    try:
        port = parts.port
    except ValueError:
        return None
    if not parts.hostname:
        return None
    return parts.hostname, port or (443 if parts.scheme == "https" else 80)


class AdaptiveExporter:
    """An OTLP exporter given the time `ExportTimeout` says: the exporters take their timeout
    when built, so one is built anew when the time moves."""

    def __init__(self, build: Callable[[float], Any], timeout: ExportTimeout, success: Any):
        self._build = build
        self._timeout = timeout
        self._success = success
        self._lock = threading.Lock()
        self._budget_s = timeout.seconds
        self._exporter = build(self._budget_s)
        self._shut = False

    def export(self, batch: Sequence[Any]) -> Any:
        with self._lock:
            if not self._shut and self._timeout.seconds != self._budget_s:
                old = self._exporter
                self._budget_s = self._timeout.seconds
                self._exporter = self._build(self._budget_s)
                old.shutdown()
            exporter, budget_s = self._exporter, self._budget_s
        started = time.monotonic()
        ok = False
        try:
            result = exporter.export(batch)
            ok = result == self._success
            return result
        finally:
            if not self._shut:  # a call cut by the abort at shutdown says nothing of the endpoint
                self._timeout.took(time.monotonic() - started, ok, budget_s)

    def shutdown(self) -> None:
        with self._lock:
            self._shut = True
            exporter = self._exporter
        exporter.shutdown()


class _Once:
    """An exporter shut down at most once: by an abort at the shutdown deadline (which stops its
    retries and cancels a call in flight) or by the provider's own shutdown, whichever is first."""

    def __init__(self, exporter: Any) -> None:
        self.exporter = exporter
        self._lock = threading.Lock()
        self.done = False

    def shutdown(self) -> None:
        with self._lock:
            if self.done:
                return
            self.done = True
        self.exporter.shutdown()


class _Confirmed:
    """Flush, abort and backlog shared by the confirming span and log-record processors."""

    _exporter: _Once
    _queue: _Confirming

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        if self._exporter.done:  # aborted: nothing more can be confirmed
            return self._queue.backlog == 0
        return self._queue.flush()

    def shutdown(self) -> None:
        self._exporter.shutdown()

    def abort(self) -> None:
        """Stop exporting now: retries end and a call in flight is cancelled."""
        self._exporter.shutdown()

    @property
    def backlog(self) -> int:
        return self._queue.backlog


class ConfirmingSpanProcessor(_Confirmed, SpanProcessor):
    """Queues ended spans; `force_flush` exports them and says whether all were accepted."""

    def __init__(
        self, exporter: Any, guard: Guard | None = None, health: ExportHealth | None = None
    ) -> None:
        self._exporter = once = _Once(exporter)
        self._queue = _Confirming(
            lambda batch: exporter.export(batch) == SpanExportResult.SUCCESS,
            guard or Guard(log, "sidecar"),
            lambda: once.done,
            (health, "traces") if health is not None else None,
        )

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        self._queue.add(span)


class ConfirmingLogProcessor(_Confirmed, LogRecordProcessor):
    """The log-record counterpart of `ConfirmingSpanProcessor`."""

    def __init__(
        self, exporter: Any, guard: Guard | None = None, health: ExportHealth | None = None
    ) -> None:
        from opentelemetry.sdk._logs import ReadableLogRecord

        self._exporter = once = _Once(exporter)
        self._readable = ReadableLogRecord
        self._queue = _Confirming(
            lambda batch: exporter.export(batch) == LogRecordExportResult.SUCCESS,
            guard or Guard(log, "sidecar"),
            lambda: once.done,
            (health, "logs") if health is not None else None,
        )

    def on_emit(self, log_record: Any) -> None:
        resource = log_record.resource if log_record.resource is not None else Resource.create({})
        self._queue.add(
            self._readable(
                log_record=log_record.log_record,
                resource=resource,
                instrumentation_scope=log_record.instrumentation_scope,
                limits=log_record.limits,
            )
        )


@dataclass(slots=True)
class VerdictExport:
    """The providers the OTLP verdict sink writes to, and their confirming processors."""

    tracer_provider: TracerProvider
    logger_provider: LoggerProvider
    span_processor: ConfirmingSpanProcessor | None
    log_processor: ConfirmingLogProcessor | None
    max_backlog: int

    @property
    def backlog(self) -> int:
        return max(
            self.span_processor.backlog if self.span_processor else 0,
            self.log_processor.backlog if self.log_processor else 0,
        )

    @property
    def full(self) -> bool:
        return self.backlog >= self.max_backlog

    def abort(self) -> None:
        """Give up on the endpoint (at the shutdown deadline); queued items stay unexported."""
        for processor in (self.span_processor, self.log_processor):
            if processor is not None:
                processor.abort()

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()
        self.logger_provider.shutdown()


def _http_url(endpoint: str | None, signal: str) -> str | None:
    if endpoint is None:
        return None
    return endpoint.rstrip("/") + f"/v1/{signal}"


def configured_timeout_s(config: ExportConfig) -> float:
    """The export timeout as configured: `serve.export.timeout_s`, else the exporters' own
    environment variable (seconds, as the Python exporters read it), else their default 10 s."""
    if config.timeout_s is not None:
        return config.timeout_s
    try:
        return float(os.environ.get("OTEL_EXPORTER_OTLP_TIMEOUT", 10))
    except ValueError:
        return 10.0


def exporter_kwargs(
    config: ExportConfig, signal: str, timeout_s: float | None = None
) -> dict[str, Any]:
    """Arguments for the OTLP exporter of ``signal`` (``timeout_s``, else the configured
    timeout); unset ones fall back to the environment."""
    kwargs: dict[str, Any] = {}
    if config.headers:
        kwargs["headers"] = dict(config.headers)
    if timeout_s is None:
        timeout_s = config.timeout_s
    if timeout_s is not None:
        kwargs["timeout"] = timeout_s
    if config.protocol == "grpc":
        if config.endpoint is not None:
            kwargs["endpoint"] = config.endpoint
        if config.insecure is not None:
            kwargs["insecure"] = config.insecure
        if config.certificate_file or config.client_certificate_file:
            import grpc

            def read(path: str | None) -> bytes | None:
                if path is None:
                    return None
                with open(path, "rb") as handle:
                    return handle.read()

            kwargs["credentials"] = grpc.ssl_channel_credentials(
                root_certificates=read(config.certificate_file),
                private_key=read(config.client_key_file),
                certificate_chain=read(config.client_certificate_file),
            )
    else:
        if config.endpoint is not None:
            kwargs["endpoint"] = _http_url(config.endpoint, signal)
        for name in ("certificate_file", "client_key_file", "client_certificate_file"):
            if getattr(config, name):
                kwargs[name] = getattr(config, name)
    return kwargs


def build_verdict_export(
    config: ExportConfig, resource: Resource, on_error: Callable[[str], None] | None = None
) -> VerdictExport:
    """Providers with confirming OTLP processors, or bare providers when export is off;
    ``on_error(where)`` counts an exporter bug (``spanjudge.internal_errors``)."""
    tracer_provider = TracerProvider(resource=resource)
    logger_provider = LoggerProvider(resource=resource)
    if not config.enabled:
        return VerdictExport(tracer_provider, logger_provider, None, None, config.max_queue_spans)
    if config.protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    else:
        from opentelemetry.exporter.otlp.proto.http._log_exporter import (  # type: ignore[assignment]
            OTLPLogExporter,
        )
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # type: ignore[assignment]
            OTLPSpanExporter,
        )
    guard = Guard(log, "sidecar", on_error=on_error)
    health = export_health(config)
    # one endpoint: what its span calls show, its log calls get too
    configured_s = configured_timeout_s(config)
    address = endpoint_address(config)
    timeout = ExportTimeout(
        configured_s, lambda: takes_connections(address, min(configured_s, _PROBE_S))
    )
    spans = ConfirmingSpanProcessor(
        AdaptiveExporter(
            lambda seconds: OTLPSpanExporter(**exporter_kwargs(config, "traces", seconds)),
            timeout,
            SpanExportResult.SUCCESS,
        ),
        guard,
        health,
    )
    logs = ConfirmingLogProcessor(
        AdaptiveExporter(
            lambda seconds: OTLPLogExporter(**exporter_kwargs(config, "logs", seconds)),
            timeout,
            LogRecordExportResult.SUCCESS,
        ),
        guard,
        health,
    )
    tracer_provider.add_span_processor(spans)
    logger_provider.add_log_record_processor(logs)
    return VerdictExport(tracer_provider, logger_provider, spans, logs, config.max_queue_spans)


class MetricExportState:
    """Whether the OTLP metric export is mid-call or its last call failed (read at shutdown)."""

    def __init__(self) -> None:
        self.busy = False
        self.last_ok: bool | None = None

    @property
    def failed(self) -> bool:
        return self.busy or self.last_ok is False


def build_metric_readers(config: ExportConfig) -> tuple[list[Any], MetricExportState | None]:
    """A periodic OTLP metric reader when export is on (metrics are aggregates: no confirmation),
    with the state of its exports so that shutdown can say whether the last one got through."""
    if not config.enabled:
        return [], None
    from opentelemetry.sdk.metrics.export import MetricExportResult, PeriodicExportingMetricReader

    base: Any
    if config.protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter

        base = OTLPMetricExporter
    else:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
            OTLPMetricExporter as HttpMetricExporter,
        )

        base = HttpMetricExporter
    state = MetricExportState()
    health = export_health(config)

    class Tracked(base):  # type: ignore[misc]
        def export(self, metrics_data: Any, timeout_millis: float = 10_000, **kwargs: Any) -> Any:
            state.busy = True
            ok = False
            try:
                with exporting(health):
                    result = super().export(metrics_data, timeout_millis=timeout_millis, **kwargs)
                ok = result == MetricExportResult.SUCCESS
                return result
            finally:
                state.last_ok = ok
                state.busy = False
                health.result("metrics", ok)

    exporter = Tracked(**exporter_kwargs(config, "metrics"))
    reader = PeriodicExportingMetricReader(
        exporter, export_interval_millis=int(config.metrics_interval_s * 1000)
    )
    return [reader], state


def report_unflushed(
    export: VerdictExport, target: str, sessions: int, spool_path: str | None
) -> None:
    """At shutdown: one line per verdict exporter that still holds items, saying what stays."""
    if spool_path is not None:
        fate = (
            f"the spans of {sessions} evaluated session(s) stay in the spool"
            f" {spool_path} and are evaluated and exported again on the next start"
        )
    else:
        fate = f"the verdicts of {sessions} session(s) are lost (the spool is off)"
    for what, processor in (
        ("evaluation span(s)", export.span_processor),
        ("verdict log record(s)", export.log_processor),
    ):
        if processor is not None and processor.backlog:
            log.warning(
                "shutdown: could not export %d %s to %s before the deadline; %s",
                processor.backlog,
                what,
                target,
                fate,
            )
