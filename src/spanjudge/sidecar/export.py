"""Verdict export over OTLP with confirmation: the spool forgets a session only once its evaluation
span and log records were accepted by the configured endpoint.

`serve` encodes each evaluated session straight into OTLP protobuf bytes (`emit.otlp`) and sends
the requests itself (`sidecar.otlp_send`), without SDK spans or exporters. Encoded spans and log
records wait, per signal, in the export requests they will go in (`ConfirmingExport`); a flush
sends those and says True only when every one was accepted; a failed one stays queued for the
next flush.
Each call gets the time `ExportTimeout` gives it, and the sender retries transient failures
within that time.
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

from opentelemetry.sdk.resources import Resource

from spanjudge import semconv
from spanjudge.emit.otlp import OtlpVerdictEncoder
from spanjudge.guard import Guard
from spanjudge.sidecar.config import ExportConfig, env_endpoint
from spanjudge.sidecar.export_health import ExportHealth, export_health, exporting
from spanjudge.sidecar.otlp_send import Sender, Sent, destination, sender_for
from spanjudge.values import SessionResult

log = logging.getLogger("spanjudge.sidecar")
# Items per export request, as the SDK's batch processors send them.
_BATCH = 512
# Encoded bytes per export request: gRPC servers refuse a message over their receive limit,
# 4 MiB by default in gRPC and in the Collector's OTLP receiver (`max_recv_msg_size_mib`), as
# RESOURCE_EXHAUSTED, for good. 3.5 MiB leaves room for what the count leaves out (the
# envelopes' lengths growing by a few bytes).
MAX_REQUEST_BYTES = 3_670_016


def endpoint_failure(exc: BaseException) -> bool:
    """Whether an exception from an export call is the endpoint's (network, TLS, timeout, an
    RPC status): retried and backpressured, not a bug. Anything else is an internal error."""
    if isinstance(exc, (OSError, TimeoutError)):  # requests' errors are OSErrors too
        return True
    try:
        import grpc
    except ImportError:  # pragma: no cover - grpcio is a dependency
        return False
    return isinstance(exc, grpc.RpcError)


@dataclass(slots=True)
class _Batch:
    """One export request being filled or waiting to be sent: its items, encoded."""

    heads: list[bytes]  # each item's `OtlpVerdictEncoder.item_head`
    items: list[bytes]  # each item's encoding
    size: int  # the request's encoded size, but for its envelopes' lengths growing
    # set when the request holds one item alone over `MAX_REQUEST_BYTES`: whose it is
    oversized: str | None = None

    def parts(self) -> list[bytes]:
        """Each item's head and then its encoding, as `OtlpVerdictEncoder.request` takes them."""
        parts = self.heads + self.items  # the right length; each half then overwritten
        parts[::2] = self.heads
        parts[1::2] = self.items
        return parts


class ConfirmingExport:
    """One signal's encoded items (evaluation spans, or log records), in export requests of at
    most `_BATCH` items and `MAX_REQUEST_BYTES` encoded each, sent on `flush`; a request that
    failed stays for the next attempt. A session's log records are split across requests when
    they do not fit in one (its session is released from the spool only once a flush sent every
    request, so all of them). One item alone over the byte bound goes in a request of its own;
    if the endpoint refuses it as too large (gRPC `RESOURCE_EXHAUSTED` "larger than max", HTTP
    413), no retry can help and it would hold every session queued after it for ever: it is
    logged as an error naming its session and dropped, counted in `dropped` and handed to
    ``on_dropped`` (`SelfTelemetry.verdicts_dropped`: the metric `spanjudge.verdicts.dropped`,
    whose series for this signal starts at zero when the export is built).

    Nothing else is ever dropped, however many wait: the spool releases a session once its
    flush succeeded, so a dropped item would be a verdict lost for good. The backlog is kept
    short by the worker instead, which stops evaluating (and receivers refuse new requests,
    retryable) while `VerdictExport.full` holds; one tick can still overshoot by the sessions it
    closes.

    A send that raises keeps its request queued either way: an endpoint failure (see
    `endpoint_failure`) is retried, and said once per outage by ``health`` (as a refused call
    is); anything else is a bug, handed to ``guard`` (logged once, counted, re-raised under
    the test suite). After `abort` nothing more is sent: a flush then says whether nothing
    is left.
    """

    def __init__(
        self,
        signal: str,
        encoder: OtlpVerdictEncoder,
        sender: Sender,
        timeout: ExportTimeout,
        guard: Guard,
        health: ExportHealth,
        on_dropped: Callable[[int, str, str], None] | None = None,
    ) -> None:
        self.signal = signal
        self.sender = sender
        self.dropped = 0  # items refused as too large, dropped
        self._on_dropped = on_dropped
        if on_dropped is not None:
            on_dropped(0, signal, semconv.DROP_TOO_LARGE)
        self._encoder = encoder
        self._item_head = encoder.item_head
        self._empty_size = len(encoder.request([]))
        self._timeout = timeout
        self._guard = guard
        self._health = health
        self._batches: list[_Batch] = []
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()

    def add(self, messages: Sequence[bytes], session: str = "") -> None:
        """Queue ``messages`` (spans or log records, each its encoding) of ``session``, in the
        last request while it stays within `_BATCH` items and `MAX_REQUEST_BYTES`, else in
        further requests."""
        heads = list(map(self._item_head, map(len, messages)))
        size = sum(map(len, heads)) + sum(map(len, messages))
        with self._lock:
            batch = self._batches[-1] if self._batches else None
            if (
                batch is not None
                and batch.oversized is None
                and len(batch.items) + len(messages) <= _BATCH
                and batch.size + size <= MAX_REQUEST_BYTES
            ):  # all of them fit in the last request, as most sessions' do
                batch.heads += heads
                batch.items += messages
                batch.size += size
                return
            for head, message in zip(heads, messages, strict=True):
                item_size = len(head) + len(message)
                if (
                    batch is None
                    or batch.oversized is not None
                    or len(batch.items) >= _BATCH
                    or (batch.items and batch.size + item_size > MAX_REQUEST_BYTES)
                ):
                    batch = _Batch(heads=[], items=[], size=self._empty_size)
                    self._batches.append(batch)
                batch.heads.append(head)
                batch.items.append(message)
                batch.size += item_size
                if batch.size > MAX_REQUEST_BYTES:  # one item alone over the bound
                    batch.oversized = session or "a session"
                    log.warning(
                        "verdict export (%s): session %s has an item of %d bytes, over the %d a"
                        " request is kept under; it is sent alone (an endpoint that takes less,"
                        " as a gRPC server by default takes 4 MiB, refuses it: it is then"
                        " dropped)",
                        self.signal,
                        batch.oversized,
                        item_size,
                        MAX_REQUEST_BYTES,
                    )

    @property
    def backlog(self) -> int:
        """Items waiting to be sent."""
        with self._lock:
            return sum(len(batch.items) for batch in self._batches)

    def flush(self) -> bool:
        with self._flush_lock:
            if self.sender.aborted:  # nothing more can be confirmed
                return self.backlog == 0
            with self._lock:
                batches, self._batches = self._batches, []
            sent = 0
            try:
                while sent < len(batches):
                    batch = batches[sent]
                    if batch.items and not self._send(batch):
                        break
                    sent += 1
            finally:
                if sent < len(batches):  # kept, even when a bug is re-raised under the tests
                    with self._lock:
                        self._batches = batches[sent:] + self._batches
            return sent == len(batches)

    def _send(self, batch: _Batch) -> bool:
        """Whether ``batch`` is done with: accepted, or dropped as too large for the endpoint."""
        try:
            result = self._timed(self._encoder.request(batch.parts()))
        except Exception as exc:
            if self.sender.aborted:  # shut down under a call in flight
                return False
            if not endpoint_failure(exc):
                self._guard.failed("verdict export")
                return False
            self._health.result(self.signal, False, exc)
            return False
        if not result.ok and self.sender.aborted:
            return False  # the abort's doing, not the endpoint's
        if not result.ok and result.too_large and batch.oversized is not None:
            self.dropped += len(batch.items)
            if self._on_dropped is not None:
                self._on_dropped(len(batch.items), self.signal, semconv.DROP_TOO_LARGE)
            log.error(
                "verdict export (%s): the endpoint refuses an item of session %s as too large"
                " (%d bytes; %s); no retry can help, so it is dropped and that session's"
                " verdicts are incomplete at the endpoint (%d item(s) dropped so far, counted"
                ' in %s: spanjudge_verdicts_dropped_total{signal="%s",reason="too_large"} in'
                " Prometheus); raise the endpoint's receive limit to keep such items",
                self.signal,
                batch.oversized,
                batch.size,
                result.detail,
                self.dropped,
                semconv.M_VERDICTS_DROPPED,
                self.signal,
            )
            return True
        why = result.detail or None
        if not result.ok and (result.permanent or result.too_large):
            why = (
                f"{result.detail}; the endpoint refuses the request itself: retrying will not"
                " help, the endpoint or the configuration must be fixed"
            )
        self._health.result(self.signal, result.ok, why=why)
        return result.ok

    def _timed(self, request: bytes) -> Sent:
        """One call, given the time `ExportTimeout` says; what it took moves that time."""
        budget_s = self._timeout.seconds
        started = time.monotonic()
        ok = False
        try:
            result = self.sender.send(request, budget_s)
            ok = result.ok
            return result
        finally:
            if not self.sender.aborted:  # a call cut by the abort says nothing of the endpoint
                self._timeout.took(time.monotonic() - started, ok, budget_s)

    def abort(self) -> None:
        """Stop sending now: retries end and a call in flight is cancelled."""
        self.sender.abort()


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


class OtlpVerdictSink:
    """`serve`'s verdict sink: each evaluated session encoded (`emit.otlp`) into the export's
    requests of both signals; `flush` sends them and says whether all were accepted."""

    def __init__(self, export: VerdictExport) -> None:
        assert export.spans is not None and export.logs is not None
        self._encoder = export.encoder
        self._spans = export.spans
        self._logs = export.logs
        self._closed = False

    def emit(self, result: SessionResult) -> None:
        if self._closed:
            return
        session = result.trajectory.session_id
        encoded = self._encoder.encode(result)  # a bug raises here: none of it is queued
        self._spans.add([encoded.span], session)
        self._logs.add(encoded.log_records, session)

    def flush(self, timeout_s: float) -> bool:
        """Both signals are flushed, whatever the first one's outcome (each call has its own
        time, `ExportTimeout`)."""
        spans_ok = self._spans.flush()
        return self._logs.flush() and spans_ok

    def shutdown(self) -> None:
        """Stop emitting; the export itself is shut down by its owner."""
        self._closed = True


@dataclass(slots=True)
class VerdictExport:
    """The OTLP verdict export of one process: its encoder and, when export is on, one
    confirming queue per signal."""

    encoder: OtlpVerdictEncoder
    spans: ConfirmingExport | None
    logs: ConfirmingExport | None
    max_backlog: int

    @property
    def backlog(self) -> int:
        return max(
            self.spans.backlog if self.spans else 0,
            self.logs.backlog if self.logs else 0,
        )

    @property
    def full(self) -> bool:
        return self.backlog >= self.max_backlog

    def sink(self) -> OtlpVerdictSink:
        """The sink that emits into this export (export must be on)."""
        return OtlpVerdictSink(self)

    def abort(self) -> None:
        """Give up on the endpoint (at the shutdown deadline); queued items stay unexported."""
        for queue in (self.spans, self.logs):
            if queue is not None:
                queue.abort()

    def shutdown(self) -> None:
        """Close the connections (what is queued stays unexported)."""
        self.abort()


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
    config: ExportConfig,
    resource: Resource,
    on_error: Callable[[str], None] | None = None,
    on_dropped: Callable[[int, str, str], None] | None = None,
) -> VerdictExport:
    """The encoder and, when export is on, a confirming queue per signal sending to the
    endpoint; ``on_error(where)`` counts a bug in sending (``spanjudge.internal_errors``),
    ``on_dropped(n, signal, reason)`` items dropped (``spanjudge.verdicts.dropped``)."""
    encoder = OtlpVerdictEncoder(resource.attributes, resource.schema_url)
    if not config.enabled:
        return VerdictExport(encoder, None, None, config.max_queue_spans)
    guard = Guard(log, "sidecar", on_error=on_error)
    health = export_health(config)
    # one endpoint: what its span calls show, its log calls get too
    configured_s = configured_timeout_s(config)
    address = endpoint_address(config)
    timeout = ExportTimeout(
        configured_s, lambda: takes_connections(address, min(configured_s, _PROBE_S))
    )
    spans = ConfirmingExport(
        "traces",
        encoder,
        sender_for(destination(config, "traces")),
        timeout,
        guard,
        health,
        on_dropped,
    )
    logs = ConfirmingExport(
        "logs",
        encoder,
        sender_for(destination(config, "logs")),
        timeout,
        guard,
        health,
        on_dropped,
    )
    return VerdictExport(encoder, spans, logs, config.max_queue_spans)


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
    for what, queue in (
        ("evaluation span(s)", export.spans),
        ("verdict log record(s)", export.logs),
    ):
        if queue is not None and queue.backlog:
            log.warning(
                "shutdown: could not export %d %s to %s before the deadline; %s",
                queue.backlog,
                what,
                target,
                fate,
            )
