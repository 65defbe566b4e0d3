"""The spool's storage fills up: real SQLite `database or disk is full` (a page limit set on the
live spool), answered as retryable on both receivers, logged once, `/healthz` not ready; once
there is room again, the same client's retries get through and nothing is lost."""

from __future__ import annotations

import http.client
import logging

import grpc
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from spanjudge.sidecar.server import Sidecar
from spanjudge.sidecar.spool import Spool
from tests.sidecar.conftest import MakeSidecar
from tests.sidecar.helpers import synthetic_session, wait_for

pytestmark = pytest.mark.slow
EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


def _body(session_id: str, *, end: bool = True) -> bytes:
    spans = synthetic_session(session_id, tools=100, end=end)
    return encode_spans(spans).SerializeToString()


def _http(sidecar: Sidecar, method: str, path: str, body: bytes = b"") -> tuple[int, dict, bytes]:
    assert sidecar.http is not None
    conn = http.client.HTTPConnection("127.0.0.1", sidecar.http.port, timeout=10)
    headers = {"Content-Type": "application/x-protobuf"} if body else {}
    conn.request(method, path, body=body or None, headers=headers)
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return response.status, dict(response.getheaders()), data


def _grpc(sidecar: Sidecar, body: bytes) -> grpc.StatusCode:
    assert sidecar.grpc is not None
    with grpc.insecure_channel(f"127.0.0.1:{sidecar.grpc.port}") as channel:
        call = channel.unary_unary(EXPORT)
        try:
            call(body, timeout=10)
        except grpc.RpcError as exc:
            return exc.code()  # type: ignore[no-any-return]
    return grpc.StatusCode.OK


def _limit_pages(spool: Spool, extra: int | None) -> None:
    """Cap the live spool's file at its current size plus ``extra`` pages (None: no cap)."""
    with spool._lock:
        db = spool._db
        pages = db.execute("PRAGMA page_count").fetchone()[0]
        db.execute(f"PRAGMA max_page_count = {pages + extra if extra is not None else 2**31}")


def test_full_storage_is_retryable_and_not_ready(
    make_sidecar: MakeSidecar, caplog: pytest.LogCaptureFixture
) -> None:
    sidecar = make_sidecar(sessions={"idle_timeout_s": 60, "end_grace_s": 0.1})
    assert isinstance(sidecar.spool, Spool)
    # an open session: nothing is released (no free pages) while the limit is on
    assert _http(sidecar, "POST", "/v1/traces", _body("before", end=False))[0] == 200
    assert _http(sidecar, "GET", "/healthz")[0] == 200
    _limit_pages(sidecar.spool, 0)
    caplog.set_level(logging.ERROR, logger="spanjudge.sidecar")
    status, headers, _ = _http(sidecar, "POST", "/v1/traces", _body("full-1"))
    assert status == 503
    assert int(headers["Retry-After"]) >= 1
    assert _grpc(sidecar, _body("full-2")) == grpc.StatusCode.UNAVAILABLE
    status, headers, text = _http(sidecar, "GET", "/healthz")
    assert status == 503
    assert b"database or disk is full" in text
    # the real cause, once, not once a request
    causes = [r for r in caplog.records if "database or disk is full" in r.getMessage()]
    assert len(causes) == 1
    assert not [r for r in caplog.records if "cannot rollback" in r.getMessage()]
    assert sidecar.handler.counts.get("invalid", 0) == 0
    _limit_pages(sidecar.spool, None)  # room again: the clients' retries get through
    assert _http(sidecar, "POST", "/v1/traces", _body("full-1"))[0] == 200
    assert _grpc(sidecar, _body("full-2")) == grpc.StatusCode.OK
    assert _http(sidecar, "GET", "/healthz")[0] == 200
    assert wait_for(lambda: sidecar.worker.evaluated_sessions == 2, 20)
    assert wait_for(lambda: sidecar.spool.requests == 1)  # the open one
