"""OTLP/HTTP `POST /v1/traces` and `POST /v1/logs` (protobuf and JSON, gzip accepted) and
`GET`/`HEAD /healthz`.

A threaded stdlib server: the handler work is the same as gRPC's and the Collector keeps a few
connections open, so a thread per connection is enough. Error bodies are `google.rpc.Status`
in the request's encoding, as the OTLP/HTTP specification asks; an unsupported Content-Type
gets 415 with a protobuf `Status`, a known path with the wrong method 405 with `Allow`. A body
comes with a Content-Length or chunked (`Transfer-Encoding: chunked`, which some SDKs send),
under the same size limit.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message
from google.rpc import code_pb2, status_pb2

from spanjudge._version import __version__
from spanjudge.sidecar.config import TlsConfig
from spanjudge.sidecar.handling import Handler
from spanjudge.sidecar.intake import (
    FORMAT_JSON,
    FORMAT_PROTOBUF,
    SIGNAL_LOGS,
    SIGNAL_TRACES,
    BadRequest,
    gunzip,
)

log = logging.getLogger("spanjudge.sidecar")
TRACES_PATH = "/v1/traces"
LOGS_PATH = "/v1/logs"
_SIGNALS = {TRACES_PATH: SIGNAL_TRACES, LOGS_PATH: SIGNAL_LOGS}
HEALTH_PATH = "/healthz"
CONTENT_TYPES = ("application/x-protobuf", "application/json")
# How much of a refused body is read before answering; beyond it the connection is just closed.
_DRAIN_BYTES = 64 * 1024 * 1024
# A chunk-size line (hex size and extensions) or trailer line longer than this is not OTLP.
_CHUNK_LINE_BYTES = 4096
_MAX_TRAILER_LINES = 64
_HEX = frozenset(b"0123456789abcdefABCDEF")
_ALLOW = {TRACES_PATH: "POST", LOGS_PATH: "POST", HEALTH_PATH: "GET, HEAD"}
_STATUS = {
    "invalid": (400, code_pb2.INVALID_ARGUMENT),
    "too_large": (413, code_pb2.INVALID_ARGUMENT),
    "unavailable": (503, code_pb2.UNAVAILABLE),
    "unauthenticated": (401, code_pb2.UNAUTHENTICATED),
    "unsupported_media_type": (415, code_pb2.INVALID_ARGUMENT),
}


def tls_context(tls: TlsConfig) -> ssl.SSLContext:
    """Server TLS context; with a client CA, a client certificate is required (mutual TLS)."""
    assert tls.cert_file is not None and tls.key_file is not None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(tls.cert_file, tls.key_file)
    if tls.client_ca_file:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(cafile=tls.client_ca_file)
    return context


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    handler: Handler
    max_request_bytes: int
    retry_after_s: int
    stopping: bool = False
    idle: dict[int, socket.socket]
    active: set[int]
    lock: threading.Lock

    def handle_error(self, request: Any, client_address: Any) -> None:
        # TLS handshake failures (no client certificate) and dropped connections land here.
        log.debug("HTTP connection from %s failed", client_address, exc_info=True)


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    timeout = 30  # a silent client does not hold a thread for ever
    server_version = f"spanjudge/{__version__}"
    # Errors the stdlib answers itself (a malformed request line, an unknown method): plain
    # text, not its HTML page.
    error_message_format = "%(code)d %(message)s: %(explain)s\n"
    error_content_type = "text/plain; charset=utf-8"

    def version_string(self) -> str:
        return self.server_version  # the stdlib appends the Python version

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("http: " + format, *args)

    def setup(self) -> None:
        super().setup()
        with self.server.lock:
            self.server.active.add(id(self))

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            with self.server.lock:
                self.server.active.discard(id(self))
                self.server.idle.pop(id(self), None)

    def handle_one_request(self) -> None:
        with self.server.lock:
            self.server.idle[id(self)] = self.connection
        super().handle_one_request()
        if self.server.stopping:
            self.close_connection = True

    def parse_request(self) -> bool:
        with self.server.lock:  # a request line arrived: not idle any more
            self.server.idle.pop(id(self), None)
        return super().parse_request()

    # --- routes ---

    def _route(self) -> str:
        return self.path.split("?", 1)[0]

    def do_GET(self) -> None:
        self._get(head=False)

    def do_HEAD(self) -> None:
        self._get(head=True)

    def _get(self, *, head: bool) -> None:
        if self._route() == HEALTH_PATH:
            problem = self.server.handler.not_ready()
            if problem is None:
                self._send(200, b"ok\n", "text/plain", head=head)
            else:
                retry = {"Retry-After": str(self.server.retry_after_s)}
                body = f"not ready: {problem}\n".encode()
                self._send(503, body, "text/plain", retry, head=head)
        else:
            self._other_method(head=head)

    def _other_method(self, *, head: bool = False) -> None:
        """A method this path does not serve: 405 with `Allow` on a known path, else 404."""
        self._discard_body()
        allow = _ALLOW.get(self._route())
        if allow is None:
            self._send(404, b"not found\n", "text/plain", head=head)
        elif self.command == "OPTIONS":
            self._send(204, b"", "text/plain", {"Allow": allow})
        else:
            message = f"method {self.command} not allowed on {self._route()}; use {allow}\n"
            self._send(405, message.encode(), "text/plain", {"Allow": allow}, head=head)

    def do_PUT(self) -> None:
        self._other_method()

    do_DELETE = do_PATCH = do_OPTIONS = do_TRACE = do_CONNECT = do_PUT

    def do_POST(self) -> None:
        signal = _SIGNALS.get(self._route())
        if signal is None:
            self._other_method()
            return
        content_type = (self.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
        fmt = FORMAT_JSON if content_type == "application/json" else FORMAT_PROTOBUF
        handler = self.server.handler
        if content_type not in (*CONTENT_TYPES, "application/protobuf"):
            self._discard_body()
            self._error(
                fmt,
                "unsupported_media_type",
                f"unsupported Content-Type {content_type or '(none)'!r};"
                f" send {' or '.join(CONTENT_TYPES)}",
            )
            handler.count("http", "invalid")
            return
        if not handler.authorized(self.headers.get_all("Authorization") or []):
            self._discard_body()
            self._error(fmt, "unauthenticated", "missing or wrong bearer token")
            handler.count("http", "unauthenticated")
            return
        try:
            body = self._read_body()
        except BadRequest as exc:
            self.close_connection = True
            result = "too_large" if exc.too_large else "invalid"
            self._error(fmt, result, exc.message)
            handler.count("http", result)
            return
        answer = handler.handle(body, fmt, "http", signal)
        if answer.response is not None:
            self._send(200, *_encode(answer.response, fmt))
        else:
            self._error(fmt, answer.result, answer.message)

    # --- helpers ---

    def _chunked(self) -> bool:
        transfer = (self.headers.get("Transfer-Encoding") or "").strip().lower()
        if transfer and transfer != "chunked":
            self.close_connection = True  # the end of such a body cannot be found
            raise BadRequest(f"unsupported Transfer-Encoding {transfer!r} (chunked or none)")
        return transfer == "chunked"

    def _read_body(self) -> bytes:
        limit = self.server.max_request_bytes
        # Transfer-Encoding wins over a Content-Length sent beside it (RFC 9112, 6.3).
        body = self._read_chunked(limit) if self._chunked() else self._read_sized(limit)
        encoding = (self.headers.get("Content-Encoding") or "identity").strip().lower()
        if encoding == "gzip":
            return gunzip(body, limit)
        if encoding not in ("identity", ""):
            raise BadRequest(f"unsupported Content-Encoding {encoding!r} (gzip or identity)")
        return body

    def _read_chunked(self, limit: int) -> bytes:
        """A chunked body, refused as soon as its chunks pass ``limit`` bytes."""
        parts: list[bytes] = []
        total = 0
        while True:
            size = self._chunk_size()
            if size is None:
                self.close_connection = True
                raise BadRequest("malformed chunked body: bad chunk-size line")
            if size == 0:
                break
            total += size
            if total > limit:
                self.close_connection = True
                self._drain_chunks(size)
                raise BadRequest(
                    f"chunked request of more than {limit} bytes exceeds the limit",
                    too_large=True,
                )
            chunk = self.rfile.read(size)
            if len(chunk) < size or self.rfile.readline(3) not in (b"\r\n", b"\n"):
                self.close_connection = True
                raise BadRequest("malformed chunked body: a chunk is cut short")
            parts.append(chunk)
        if self._skip_trailer():
            return b"".join(parts)
        self.close_connection = True
        raise BadRequest("malformed chunked body: too many trailer lines")

    def _chunk_size(self) -> int | None:
        """The size on the next chunk-size line (extensions ignored), None when it is no such
        line."""
        line = self.rfile.readline(_CHUNK_LINE_BYTES + 1)
        size_text = line.split(b";", 1)[0].strip()
        if not line.endswith(b"\n") or not size_text or not _HEX.issuperset(size_text):
            return None
        return int(size_text, 16)

    def _skip_trailer(self) -> bool:
        """Read the trailer fields (ignored) up to the blank line; False when there are too many."""
        for _ in range(_MAX_TRAILER_LINES):
            if self.rfile.readline(_CHUNK_LINE_BYTES + 1) in (b"\r\n", b"\n", b""):
                return True
        return False

    def _read_sized(self, limit: int) -> bytes:
        length_header = self.headers.get("Content-Length")
        if length_header is None:
            raise BadRequest("a Content-Length header or Transfer-Encoding: chunked is required")
        try:
            length = int(length_header)
        except ValueError:
            raise BadRequest(f"bad Content-Length {length_header!r}") from None
        if length < 0:
            raise BadRequest(f"bad Content-Length {length_header!r}")
        if length > limit:
            # Read it first (up to a bound): a 413 written while the client is still sending
            # reaches it as a broken pipe or a reset, which exporters retry as a network error.
            self._drain(length)
            raise BadRequest(
                f"request of {length} bytes exceeds the limit of {limit}", too_large=True
            )
        body = self.rfile.read(length)
        if len(body) < length:
            raise BadRequest("request body shorter than its Content-Length")
        return body

    def _discard_body(self) -> None:
        if (self.headers.get("Transfer-Encoding") or "").strip():
            # Read it (within the limit) so that the answer reaches the client, then close.
            with contextlib.suppress(BadRequest):
                if self._chunked():
                    self._read_chunked(self.server.max_request_bytes)
            self.close_connection = True
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if 0 <= length <= self.server.max_request_bytes:
            self.rfile.read(length)
        else:
            self._drain(length)
            self.close_connection = True

    def _drain_chunks(self, size: int) -> None:
        """Read and discard the rest of a refused chunked body (this chunk of ``size`` bytes and
        the ones after it), at most `_DRAIN_BYTES` of it, so that the answer reaches a client
        that sends its whole body before reading one."""
        left = max(_DRAIN_BYTES, self.server.max_request_bytes)
        next_size: int | None = size
        while next_size and next_size + 2 <= left:  # the chunk and its line end
            if not self._skip(next_size + 2):
                return
            left -= next_size + 2
            next_size = self._chunk_size()
        if next_size == 0:  # the last chunk: its trailer follows
            self._skip_trailer()

    def _drain(self, length: int) -> None:
        """Read and discard up to ``length`` bytes of body, at most `_DRAIN_BYTES` of it."""
        self._skip(min(length, max(_DRAIN_BYTES, self.server.max_request_bytes)))

    def _skip(self, length: int) -> bool:
        """Read and discard ``length`` bytes, a piece at a time; False if the body ends first."""
        while length > 0:
            piece = self.rfile.read(min(length, 1 << 16))
            if not piece:
                return False
            length -= len(piece)
        return True

    def _error(self, fmt: str, result: str, message: str) -> None:
        status, code = _STATUS.get(result, (500, code_pb2.INTERNAL))
        headers = {}
        if status == 503:
            headers["Retry-After"] = str(self.server.retry_after_s)
        if status == 401:
            headers["WWW-Authenticate"] = "Bearer"
        self._send(status, *_encode(status_pb2.Status(code=code, message=message), fmt), headers)

    def _send(
        self,
        status: int,
        body: bytes,
        content_type: str,
        headers: dict[str, str] | None = None,
        *,
        head: bool = False,
    ) -> None:
        """One response; for HEAD (``head``) the headers a GET would get, without the body."""
        self.send_response(status)
        if status != 204:
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if not head and status != 204:
            self.wfile.write(body)


def _encode(message: Message, fmt: str) -> tuple[bytes, str]:
    if fmt == FORMAT_JSON:
        return json_format.MessageToJson(message, indent=None).encode(), "application/json"
    return message.SerializeToString(), "application/x-protobuf"


class HttpReceiver:
    """The HTTP receiver; `start` binds, serves on a thread and returns the bound port."""

    def __init__(
        self,
        handler: Handler,
        endpoint: str,
        *,
        tls: TlsConfig,
        max_request_bytes: int,
        retry_after_s: int,
    ) -> None:
        host, _, port = endpoint.rpartition(":")
        self._server = _Server(
            (host.strip("[]"), int(port)), _RequestHandler, bind_and_activate=True
        )
        server = self._server
        server.handler = handler
        server.max_request_bytes = max_request_bytes
        server.retry_after_s = retry_after_s
        server.idle = {}
        server.active = set()
        server.lock = threading.Lock()
        if tls.enabled:
            # The handshake runs on the connection's own thread, not in the accept loop.
            server.socket = tls_context(tls).wrap_socket(
                server.socket, server_side=True, do_handshake_on_connect=False
            )
        self.port = int(server.server_address[1])
        self._thread: threading.Thread | None = None

    def start(self) -> int:
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.2},
            name="spanjudge-http",
            daemon=True,
        )
        self._thread.start()
        return self.port

    def stop(self, grace_s: float) -> None:
        """Stop accepting, close idle keep-alive connections, let in-flight requests finish."""
        server = self._server
        server.stopping = True
        server.shutdown()
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            with server.lock:
                for sock in server.idle.values():
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)
                if not server.active:
                    break
            time.sleep(0.02)
        server.server_close()
