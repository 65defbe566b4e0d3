"""What both receivers do with one export request, independent of the transport.

Auth, decode, validate, spool, answer: `Handler.handle` turns a body into an `Answer` that the
gRPC and HTTP receivers translate into their status codes. Nothing in here lets an input error
escape as an exception.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from google.protobuf.message import Message
from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsPartialSuccess,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess,
    ExportTraceServiceResponse,
)

from spanjudge import semconv
from spanjudge.guard import Guard
from spanjudge.sidecar.config import InputConfig
from spanjudge.sidecar.intake import (
    SIGNAL_TRACES,
    BadRequest,
    Decoded,
    is_logs_format,
    stored_format,
)
from spanjudge.sidecar.shards import ShardedWorker
from spanjudge.sidecar.worker import Overloaded, Worker
from spanjudge.spans.limits import Limits

log = logging.getLogger("spanjudge.sidecar")
Result = Literal["ok", "partial", "invalid", "too_large", "unavailable", "unauthenticated"]


@dataclass(frozen=True, slots=True)
class Answer:
    """The outcome of one request: ``response`` is set for ok/partial, ``message`` otherwise."""

    result: Result
    # ExportTraceServiceResponse, or ExportLogsServiceResponse for a logs request
    response: Message | None = None
    message: str = ""


def bearer_ok(values: Sequence[str], token: bytes | None) -> bool:
    """The one rule for `authorization` on every port: exactly one value (two are ambiguous,
    whichever a proxy added), the `Bearer` scheme in any case (RFC 7235), the token compared
    in constant time. No token configured: everything passes."""
    if token is None:
        return True
    if len(values) != 1:
        return False
    scheme, _, credentials = values[0].strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(credentials.strip().encode(), token)


class SidecarTelemetry:
    """Requests by transport and result, spool bytes and pending spans (self-telemetry)."""

    def __init__(self, meter_provider: Any, worker: Worker) -> None:
        provider = meter_provider or metrics.get_meter_provider()
        meter = provider.get_meter(semconv.SJ_SCOPE_NAME + ".sidecar")
        self._requests = meter.create_counter(
            semconv.M_SIDECAR_REQUESTS, unit="1", description="Export requests by result"
        )
        self._worker = worker
        meter.create_observable_gauge(
            semconv.M_SIDECAR_SPOOL_BYTES,
            callbacks=[lambda options: [Observation(worker.spool.bytes)]],
            unit="By",
            description="Bytes of request bodies held in the spool",
        )
        limit = getattr(getattr(worker, "spool", None), "max_bytes", None)
        if limit:
            meter.create_observable_gauge(
                semconv.M_SIDECAR_SPOOL_LIMIT_BYTES,
                callbacks=[lambda options: [Observation(limit)]],
                unit="By",
                description="Spool size at which receivers answer with retryable errors",
            )
        meter.create_observable_gauge(
            semconv.M_SIDECAR_PENDING_SPANS,
            callbacks=[self._pending],
            # not "1": remote write would add a `_ratio` suffix to a unit-1 gauge
            unit="{span}",
            description="Spans accepted but not yet in a session",
        )

    def _pending(self, options: CallbackOptions) -> list[Observation]:
        return [Observation(self._worker.pending_spans)]

    def request(self, transport: str, result: str) -> None:
        self._requests.add(
            1, {semconv.SIDECAR_TRANSPORT: transport, semconv.SIDECAR_RESULT: result}
        )


class Handler:
    """Turns export requests into answers; shared by the gRPC and HTTP receivers."""

    def __init__(
        self,
        worker: Worker,
        *,
        limits: Limits,
        checks: InputConfig,
        token: str | None,
        telemetry: SidecarTelemetry | None = None,
    ) -> None:
        self.worker = worker
        self.limits = limits
        self.checks = checks
        self._token = token.encode() if token else None
        self.telemetry = telemetry
        self.counts: dict[str, int] = {}
        wt = worker.telemetry
        self.guard = Guard(log, "sidecar receiver", on_error=wt.internal_error if wt else None)

    def authorized(self, values: Sequence[str]) -> bool:
        """Whether the `authorization` header values of one request carry the token."""
        return bearer_ok(values, self._token)

    def not_ready(self) -> str | None:
        """Why requests are refused right now, or some evaluation process does not answer
        (for `/healthz`), or None when ready."""
        if self.worker.crashed is not None:
            return f"the evaluation worker died: {self.worker.crashed}"
        if isinstance(self.worker, ShardedWorker) and (silent := self.worker.unresponsive()):
            return silent
        problem = self.worker.storage_problem
        return f"spool cannot write: {problem}" if problem is not None else None

    def count(self, transport: str, result: str) -> None:
        self.counts[result] = self.counts.get(result, 0) + 1
        if self.telemetry is not None:
            self.telemetry.request(transport, result)

    def handle(self, body: bytes, fmt: str, transport: str, signal: str = SIGNAL_TRACES) -> Answer:
        """Decode, validate and spool one request body of ``signal`` (traces or logs: log
        records become their carriers, `spans.logs`); never raises."""
        try:
            answer = self._handle(body, stored_format(fmt, signal))
        except Exception as exc:  # last guard: input must never take a receiver thread down
            # An internal error, not the input's: answered retryable (503 + Retry-After /
            # UNAVAILABLE), as a permanent error would make the client drop the spans for good.
            self.guard.failed("handling an export request")
            answer = Answer(
                "unavailable", message=f"internal error, retry later: {type(exc).__name__}: {exc}"
            )
        self.count(transport, answer.result)
        return answer

    def _handle(self, body: bytes, fmt: str) -> Answer:
        # Before decoding: a client resending while spanjudge is behind costs no decoding.
        if (reason := self.worker.refusal(len(body))) is not None:
            return Answer("unavailable", message=f"spanjudge is overloaded, retry later: {reason}")
        logs = is_logs_format(fmt)
        try:
            decoded = self.worker.decode(body, fmt)
        except BadRequest as exc:
            return Answer("too_large" if exc.too_large else "invalid", message=exc.message)
        telemetry = self.worker.telemetry
        if telemetry is not None:
            if decoded.problems and not logs:
                telemetry.spans_dropped(len(decoded.problems), semconv.DROP_REJECTED)
            if logs:
                for reason, n in (decoded.unread or {}).items():
                    telemetry.log_records_unread(n, reason)
                if decoded.problems:
                    telemetry.log_records_unread(len(decoded.problems), semconv.DROP_REJECTED)
        if not decoded.records:
            if decoded.problems:
                what = "log record" if logs else "span"
                return Answer(
                    "invalid", message=f"every {what} was rejected: " + decoded.error_message()
                )
            return Answer("ok", response=_response(logs))
        try:
            self.worker.submit(body, fmt, decoded.records, decoded.sizes)
        except Overloaded as exc:  # a budget filled since the check above
            return Answer("unavailable", message=f"spanjudge is overloaded, retry later: {exc}")
        if decoded.problems:
            return Answer("partial", response=_response(logs, decoded))
        return Answer("ok", response=_response(logs))


def _response(logs: bool, rejected: Decoded | None = None) -> Message:
    """The OTLP export response of the request's signal; with ``rejected``, a partial success."""
    if rejected is None:
        return ExportLogsServiceResponse() if logs else ExportTraceServiceResponse()
    n, message = len(rejected.problems), rejected.error_message()
    if logs:
        return ExportLogsServiceResponse(
            partial_success=ExportLogsPartialSuccess(rejected_log_records=n, error_message=message)
        )
    return ExportTraceServiceResponse(
        partial_success=ExportTracePartialSuccess(rejected_spans=n, error_message=message)
    )
