"""Prometheus `GET /metrics` on its own port, with the receivers' TLS and bearer token.

prometheus_client's own server has no token check, so a sidecar that asks clients for TLS and
a token would otherwise publish its telemetry (agent names, skill names) in plain HTTP to
anyone. The same `tls:` and `auth:` settings apply here as on the receivers; Prometheus scrapes
with `scheme: https`, `tls_config` and `authorization`.
"""

from __future__ import annotations

import gzip
import logging
import threading
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import REGISTRY
from prometheus_client.exposition import choose_encoder

from spanjudge.sidecar.config import TlsConfig
from spanjudge.sidecar.http_receiver import tls_context

log = logging.getLogger("spanjudge.sidecar")
METRICS_PATH = "/metrics"


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    authorized: Callable[[Sequence[str]], bool]

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("metrics connection from %s failed", client_address, exc_info=True)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = 30

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("metrics: " + format, *args)

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0] != METRICS_PATH:
            self._send(404, b"not found; scrape /metrics\n", "text/plain")
            return
        if not self.server.authorized(self.headers.get_all("Authorization") or []):
            self._send(401, b"missing or wrong bearer token\n", "text/plain", challenge=True)
            return
        encoder, content_type = choose_encoder(self.headers.get("Accept") or "")
        body = encoder(REGISTRY)
        if "gzip" in (self.headers.get("Accept-Encoding") or ""):
            self._send(200, gzip.compress(body), content_type, compressed=True)
        else:
            self._send(200, body, content_type)

    def _send(
        self,
        status: int,
        body: bytes,
        content_type: str,
        *,
        challenge: bool = False,
        compressed: bool = False,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if compressed:
            self.send_header("Content-Encoding", "gzip")
        if challenge:
            self.send_header("WWW-Authenticate", "Bearer")
        self.end_headers()
        self.wfile.write(body)


class MetricsServer:
    """Serves the default Prometheus registry (where `PrometheusMetricReader` registers)."""

    def __init__(
        self, endpoint: str, *, tls: TlsConfig, authorized: Callable[[Sequence[str]], bool]
    ) -> None:
        host, _, port = endpoint.rpartition(":")
        self._server = _Server((host.strip("[]"), int(port)), _Handler)
        self._server.authorized = authorized
        if tls.enabled:
            self._server.socket = tls_context(tls).wrap_socket(
                self._server.socket, server_side=True, do_handshake_on_connect=False
            )
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.2},
            name="spanjudge-metrics",
            daemon=True,
        )
        self._thread.start()

    def shutdown(self) -> None:
        self._server.shutdown()

    def server_close(self) -> None:
        self._server.server_close()
