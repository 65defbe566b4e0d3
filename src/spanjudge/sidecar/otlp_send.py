"""Sending OTLP export requests over gRPC or HTTP/protobuf, as the OpenTelemetry OTLP exporters
send them: `serve`'s verdicts, encoded by `emit.otlp` (requests as bytes, sent as they are),
without SDK spans or exporters.

Where and how (`destination`) is resolved from `serve.export` and, for what it leaves unset, the
`OTEL_EXPORTER_OTLP_{TRACES,LOGS}_*` and `OTEL_EXPORTER_OTLP_*` variables, as the exporters
resolve them: endpoint, headers, TLS (insecure, certificate, client key and certificate),
compression. A call that fails transiently is retried with exponential backoff (1, 2, 4 s...,
each within 20% either way; a server's `RetryInfo` or `Retry-After` instead) while the call's
time lasts, up to six attempts: gRPC `CANCELLED`, `DEADLINE_EXCEEDED`, `RESOURCE_EXHAUSTED`,
`ABORTED`, `OUT_OF_RANGE`, `UNAVAILABLE`, `DATA_LOSS`; HTTP 429, 502, 503, 504 and connection
errors. A partial success (the endpoint rejected some items) is accepted, as the OTLP
specification asks (a retry cannot help), and logged. Only HTTP 2xx is accepted: a redirect is
not followed (the body would not be sent again) and is a failure saying where it points. A
refusal no retry can help (gRPC `INVALID_ARGUMENT` and the like, HTTP 4xx other than 429) is
marked `permanent`; a message over the endpoint's size limit `too_large`. gRPC metadata keys are
sent in lower case, as gRPC requires. `abort` ends a sender: its retries stop, a gRPC call in
flight is cancelled and an HTTP one is no longer waited for. The calls are made with
instrumentation suppressed, as the OTLP exporters make theirs.

Not supported: the exporters' credential-provider entry points
(`OTEL_PYTHON_EXPORTER_OTLP_*_CREDENTIAL_PROVIDER`). An unknown compression in the environment is
a warning (compression off), where the gRPC exporter raised; `deflate` over gRPC is refused (the
gRPC exporters take only gzip, and the Collector answers such calls `UNIMPLEMENTED`).
"""

from __future__ import annotations

import contextlib
import datetime
import gzip
import logging
import os
import random
import threading
import time
import urllib.parse
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any

import grpc
import requests
from google.protobuf.message import DecodeError, Message
from google.rpc.error_details_pb2 import RetryInfo
from opentelemetry import context
from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.util.re import parse_env_headers

from spanjudge._version import __version__
from spanjudge.sidecar.config import ExportConfig

log = logging.getLogger("spanjudge.sidecar")

MAX_ATTEMPTS = 6
_JITTER = 0.2
_RETRYABLE_CODES = frozenset(
    {
        grpc.StatusCode.CANCELLED,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.OUT_OF_RANGE,
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DATA_LOSS,
    }
)
_RETRYABLE_STATUS = frozenset({429, 502, 503, 504})
# A request the endpoint refuses as such: sending it again gets the same answer.
_PERMANENT_CODES = frozenset(
    {
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.UNIMPLEMENTED,
        grpc.StatusCode.FAILED_PRECONDITION,
    }
)
_CONNECTION_ERRORS = (requests.ConnectionError, requests.Timeout)  # SSL and proxy errors too
_USER_AGENT = f"spanjudge/{__version__}"
_COMPRESSIONS = ("none", "gzip", "deflate")
_DETAIL_CHARS = 240
_PATHS = {"traces": "v1/traces", "logs": "v1/logs"}
_GRPC_EXPORT: dict[str, tuple[str, type[Message]]] = {
    "traces": (
        "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
        trace_service_pb2.ExportTraceServiceResponse,
    ),
    "logs": (
        "/opentelemetry.proto.collector.logs.v1.LogsService/Export",
        logs_service_pb2.ExportLogsServiceResponse,
    ),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Destination:
    """Where and how one signal's export requests go."""

    protocol: str  # "grpc" or "http/protobuf"
    signal: str  # "traces" or "logs"
    target: str  # gRPC: host:port; HTTP: the signal's URL
    insecure: bool  # gRPC: plaintext (HTTP: the URL's scheme says)
    headers: tuple[tuple[str, str], ...]
    compression: str  # "none", "gzip" or (HTTP only) "deflate"
    certificate_file: str | None
    client_key_file: str | None
    client_certificate_file: str | None


def _env(signal: str, name: str) -> str | None:
    """``OTEL_EXPORTER_OTLP_<SIGNAL>_<NAME>``, else ``OTEL_EXPORTER_OTLP_<NAME>`` (None if unset
    or empty)."""
    for variable in (f"OTEL_EXPORTER_OTLP_{signal.upper()}_{name}", f"OTEL_EXPORTER_OTLP_{name}"):
        value = os.environ.get(variable)
        if value:
            return value
    return None


def _compression(signal: str) -> str:
    value = (_env(signal, "COMPRESSION") or "none").strip().lower()
    if value not in _COMPRESSIONS:
        log.warning(
            "verdict export: unknown compression %r in the environment (OTEL_EXPORTER_OTLP_*"
            "COMPRESSION: none, gzip or deflate); sending uncompressed",
            value,
        )
        return "none"
    return value


def _tls_files(config: ExportConfig, signal: str) -> tuple[str | None, str | None, str | None]:
    """The CA certificate, client key and client certificate: the configured ones, else the
    signal's variables, else the general ones."""
    if config.certificate_file or config.client_certificate_file or config.client_key_file:
        return config.certificate_file, config.client_key_file, config.client_certificate_file
    return (
        _env(signal, "CERTIFICATE"),
        _env(signal, "CLIENT_KEY"),
        _env(signal, "CLIENT_CERTIFICATE"),
    )


def destination(config: ExportConfig, signal: str) -> Destination:
    """Where ``signal``'s requests go, as the OTLP exporter for ``config.protocol`` would send
    them (the configuration first, then the environment, then the exporters' defaults)."""
    protocol = config.protocol or "grpc"
    env_headers = parse_env_headers(_env(signal, "HEADERS") or "", liberal=True)
    ca, key, cert = _tls_files(config, signal)
    if protocol == "grpc":
        endpoint = config.endpoint or _env(signal, "ENDPOINT") or "http://localhost:4317"
        parts = urllib.parse.urlparse(endpoint)
        insecure = config.insecure
        if parts.scheme == "https":
            insecure = False
        if insecure is None:
            flag = _env(signal, "INSECURE")
            insecure = flag.strip().lower() == "true" if flag else parts.scheme == "http"
        # gRPC metadata keys are lower case (grpcio refuses others: "Invalid metadata")
        headers = {name.lower(): value for name, value in config.headers.items()} or {
            name.lower(): value for name, value in env_headers.items()
        }
        compression = _compression(signal)
        if compression == "deflate":  # `serve`'s configuration check refuses it at start
            raise ValueError(
                "OTEL_EXPORTER_OTLP_COMPRESSION: deflate is not supported over gRPC (use gzip)"
            )
        return Destination(
            protocol=protocol,
            signal=signal,
            target=parts.netloc or endpoint,
            insecure=insecure,
            headers=tuple(headers.items()),
            compression=compression,
            certificate_file=ca,
            client_key_file=key,
            client_certificate_file=cert,
        )
    if config.endpoint:
        url = config.endpoint.rstrip("/") + "/" + _PATHS[signal]
    else:
        url = os.environ.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT") or (
            (os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or "http://localhost:4318").removesuffix(
                "/"
            )
            + "/"
            + _PATHS[signal]
        )
    headers = {"content-type": "application/x-protobuf", "user-agent": _USER_AGENT}
    headers.update(env_headers)
    headers.update({name.lower(): value for name, value in config.headers.items()})
    return Destination(
        protocol=protocol,
        signal=signal,
        target=url,
        insecure=urllib.parse.urlparse(url).scheme == "http",
        headers=tuple(headers.items()),
        compression=_compression(signal),
        certificate_file=ca,
        client_key_file=key,
        client_certificate_file=cert,
    )


@dataclass(frozen=True, slots=True)
class Sent:
    """An export call's outcome: accepted, or why not (the endpoint's or the network's words)."""

    ok: bool
    detail: str = ""
    permanent: bool = False  # refused for good (a bad request): a retry cannot help
    too_large: bool = False  # refused as over the endpoint's message size limit


@dataclass(frozen=True, slots=True)
class _Attempt:
    """One attempt: its outcome, whether another may help, and the server's wait if it said."""

    sent: Sent
    retryable: bool = False
    wait_s: float | None = None


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _DETAIL_CHARS else text[: _DETAIL_CHARS - 1] + "…"


_ABORT_POLL_S = 0.05  # how often a wait for an HTTP call in flight looks for an abort


class _Aborted(Exception):
    """The sender was aborted while a call was in flight."""


@contextlib.contextmanager
def _suppressed() -> Iterator[None]:
    """No telemetry of the export's own calls: under `opentelemetry-instrument`, the
    instrumentations of grpc, requests and urllib3 create no spans for them (the key the OTLP
    exporters attach for the same reason)."""
    token = context.attach(context.set_value(_SUPPRESS_INSTRUMENTATION_KEY, True))
    try:
        yield
    finally:
        context.detach(token)


class Sender:
    """Export requests of one signal to one destination; subclasses make the attempts."""

    def __init__(self, where: Destination) -> None:
        self.where = where
        self._aborted = threading.Event()
        self._partial_warned = False

    @property
    def aborted(self) -> bool:
        return self._aborted.is_set()

    def send(self, request: bytes, timeout_s: float) -> Sent:
        """Send ``request`` (an encoded export request of this sender's signal), retrying
        transient failures until ``timeout_s`` is spent."""
        with _suppressed():
            return self._send(request, timeout_s)

    def _send(self, request: bytes, timeout_s: float) -> Sent:
        body = self._prepare(request)
        deadline = time.monotonic() + timeout_s
        sent = Sent(False, "no time left for the call")  # until an attempt says more
        for attempt in range(MAX_ATTEMPTS):
            if self.aborted:
                return Sent(False, "aborted")
            left_s = deadline - time.monotonic()
            if left_s <= 0:
                return sent
            outcome = self._attempt(body, left_s, attempt)
            sent = outcome.sent
            if sent.ok or not outcome.retryable or self.aborted:
                return sent
            wait_s = outcome.wait_s
            if wait_s is None:
                wait_s = 2**attempt * random.uniform(1 - _JITTER, 1 + _JITTER)
            if attempt + 1 == MAX_ATTEMPTS or wait_s > deadline - time.monotonic():
                return sent
            log.debug(
                "verdict export (%s) to %s: %s; retrying in %.2fs",
                self.where.signal,
                self.where.target,
                sent.detail,
                wait_s,
            )
            if self._aborted.wait(wait_s):
                return Sent(False, "aborted")
        return sent

    def abort(self) -> None:
        """Stop: retries end, a call in flight is cancelled where the transport can."""
        self._aborted.set()

    def _prepare(self, request: bytes) -> bytes:
        """What each attempt sends: the request, or its compressed body."""
        return request

    def _attempt(self, body: bytes, timeout_s: float, attempt: int) -> _Attempt:
        raise NotImplementedError

    def _accepted(self, response: Message) -> Sent:
        """An accepted call: a partial success (some items rejected) is logged."""
        partial = getattr(response, "partial_success", None)
        if partial is not None and partial.ByteSize():
            rejected = (
                partial.rejected_spans
                if self.where.signal == "traces"
                else partial.rejected_log_records
            )
            level = logging.DEBUG if self._partial_warned else logging.WARNING
            self._partial_warned = True
            log.log(
                level,
                "verdict export (%s) to %s: the endpoint rejected %d of the items it was sent"
                " (%s); they are not sent again",
                self.where.signal,
                self.where.target,
                rejected,
                partial.error_message or "no reason given",
            )
        return Sent(True)


def _read(path: str | None) -> bytes | None:
    if path is None:
        return None
    with open(path, "rb") as handle:
        return handle.read()


class GrpcSender(Sender):
    """OTLP/gRPC: the collector's `TraceService` or `LogsService` over one channel."""

    def __init__(self, where: Destination) -> None:
        super().__init__(where)
        self._lock = threading.Lock()
        self._credentials: grpc.ChannelCredentials | None = None
        if not where.insecure:
            self._credentials = grpc.ssl_channel_credentials(
                root_certificates=_read(where.certificate_file),
                private_key=_read(where.client_key_file),
                certificate_chain=_read(where.client_certificate_file),
            )
        self._channel, self._export = self._connect()

    def _connect(self) -> tuple[grpc.Channel, Callable[..., Any]]:
        compression = (
            grpc.Compression.Gzip
            if self.where.compression == "gzip"
            else grpc.Compression.NoCompression
        )
        options = [("grpc.primary_user_agent", _USER_AGENT)]
        if self._credentials is None:
            channel = grpc.insecure_channel(
                self.where.target, options=options, compression=compression
            )
        else:
            channel = grpc.secure_channel(
                self.where.target, self._credentials, options=options, compression=compression
            )
        # The service's Export method, as its generated stub calls it, but for the request:
        # already encoded, so sent as it is (no request serializer).
        method, response = _GRPC_EXPORT[self.where.signal]
        return channel, channel.unary_unary(method, response_deserializer=response.FromString)

    def _attempt(self, body: bytes, timeout_s: float, attempt: int) -> _Attempt:
        with self._lock:
            export = self._export
        try:
            response = export(body, metadata=self.where.headers, timeout=timeout_s)
        except grpc.RpcError as error:
            return self._failed(error, attempt)
        except ValueError:  # "Cannot invoke RPC on closed channel!": aborted meanwhile
            if self.aborted:
                return _Attempt(Sent(False, "aborted"))
            raise
        return _Attempt(self._accepted(response))

    def _failed(self, error: grpc.RpcError, attempt: int) -> _Attempt:
        code = error.code()
        details = error.details() or ""
        wait_s = None
        for key, value in error.trailing_metadata() or ():
            if key == "google.rpc.retryinfo-bin":
                info = RetryInfo.FromString(value)
                wait_s = info.retry_delay.seconds + info.retry_delay.nanos / 1e9
        if code == grpc.StatusCode.UNAVAILABLE and attempt == 0:
            # A new channel: the old one may hold a connection the endpoint has dropped.
            with self._lock:  # (an abort closes whichever channel is current after it)
                old = None if self.aborted else self._channel
                if old is not None:
                    self._channel, self._export = self._connect()
            if old is not None:
                old.close()
        retryable = code in _RETRYABLE_CODES
        too_large = code == grpc.StatusCode.RESOURCE_EXHAUSTED and "larger than max" in details
        return _Attempt(
            Sent(
                False,
                _short(f"{code.name}: {details}"),
                permanent=code in _PERMANENT_CODES,
                too_large=too_large,
            ),
            retryable=retryable and not too_large,
            wait_s=wait_s,
        )

    def abort(self) -> None:
        super().abort()
        with self._lock:
            channel = self._channel
        channel.close()  # cancels a call in flight


class HttpSender(Sender):
    """OTLP/HTTP with protobuf bodies: POST to the signal's URL."""

    def __init__(self, where: Destination) -> None:
        super().__init__(where)
        self._session = requests.Session()
        # Given with each request: a session's own `verify` gives way to REQUESTS_CA_BUNDLE.
        self._verify: str | bool = where.certificate_file or True
        cert, key = where.client_certificate_file, where.client_key_file
        self._cert: str | tuple[str, str] | None = (cert, key) if cert and key else cert
        self._headers = dict(where.headers)
        if where.compression != "none":
            self._headers["content-encoding"] = where.compression
        self._response_type: type[Message] = (
            trace_service_pb2.ExportTraceServiceResponse
            if where.signal == "traces"
            else logs_service_pb2.ExportLogsServiceResponse
        )

    def _prepare(self, request: bytes) -> bytes:
        if self.where.compression == "gzip":
            return gzip.compress(request)
        if self.where.compression == "deflate":
            return zlib.compress(request)
        return request

    def _attempt(self, body: bytes, timeout_s: float, attempt: int) -> _Attempt:
        started = time.monotonic()
        try:
            response = self._post(body, timeout_s)
        except _Aborted:
            return _Attempt(Sent(False, "aborted"))
        except _CONNECTION_ERRORS as error:
            left_s = timeout_s - (time.monotonic() - started)
            if left_s <= 0 or self.aborted:
                return _Attempt(Sent(False, _short(str(error))), retryable=True)
            try:  # once more at once: often a pooled connection the endpoint had closed
                response = self._post(body, left_s)
            except _Aborted:
                return _Attempt(Sent(False, "aborted"))
            except _CONNECTION_ERRORS as again:
                return _Attempt(Sent(False, _short(str(again))), retryable=True)
        except requests.RequestException as error:
            return _Attempt(Sent(False, _short(str(error))))
        status = response.status_code
        if 200 <= status < 300:
            return _Attempt(self._accepted(self._parsed(response.content)))
        if 300 <= status < 400:  # not followed (a POST's body is not sent again): not accepted
            where = response.headers.get("location") or "nowhere said"
            detail = _short(
                f"HTTP {status} {response.reason}: the endpoint redirected to {where}; set the"
                " endpoint to the final URL"
            )
            return _Attempt(Sent(False, detail, permanent=True))
        detail = _short(f"HTTP {status} {response.reason}: {response.text}")
        retryable = status in _RETRYABLE_STATUS
        wait_s = _retry_after(response.headers.get("retry-after")) if retryable else None
        sent = Sent(
            False, detail, permanent=400 <= status < 500 and not retryable, too_large=status == 413
        )
        return _Attempt(sent, retryable=retryable, wait_s=wait_s)

    def _post(self, body: bytes, timeout_s: float) -> requests.Response:
        """One POST, made in a thread of its own so that `abort` can stop waiting for it:
        requests has no way to cancel a call in flight, and closing its session does not end
        one. At the abort the call is left to end within its own timeout, unwaited, and the
        attempt says "aborted": its items stay queued, their sessions spooled."""
        outcome: list[requests.Response | BaseException] = []
        done = threading.Event()

        def call() -> None:
            try:
                with _suppressed():
                    outcome.append(
                        self._session.post(
                            self.where.target,
                            data=body,
                            headers=self._headers,
                            timeout=timeout_s,
                            allow_redirects=False,
                            verify=self._verify,
                            cert=self._cert,
                        )
                    )
            except BaseException as error:  # handed to the waiting thread
                outcome.append(error)
            finally:
                done.set()

        threading.Thread(target=call, name="spanjudge-otlp-http", daemon=True).start()
        while not done.wait(_ABORT_POLL_S):
            if self.aborted:
                raise _Aborted
        if isinstance(outcome[0], BaseException):
            raise outcome[0]
        return outcome[0]

    def _parsed(self, content: bytes) -> Message:
        response = self._response_type()
        try:
            response.ParseFromString(content)
        except DecodeError:  # not protobuf (an empty or JSON body): nothing partial to report
            return self._response_type()
        return response

    def abort(self) -> None:
        super().abort()
        self._session.close()


def _retry_after(value: str | None) -> float | None:
    """A `Retry-After` header's wait in seconds: a number, or an HTTP date."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=datetime.timezone.utc)
        return max(0.0, when.timestamp() - time.time())
    return max(0.0, seconds) if seconds == seconds and seconds != float("inf") else None


def sender_for(where: Destination) -> Sender:
    """The sender for a destination's protocol."""
    return GrpcSender(where) if where.protocol == "grpc" else HttpSender(where)
