"""Input that must never poison output or vanish after a 200: a lone surrogate in OTLP/JSON,
multi-member gzip, trailing garbage, and an oversized body the client must see refused."""

from __future__ import annotations

import gzip
import http.client
import json
import socket
import urllib.request
from pathlib import Path

import pytest
from google.protobuf import json_format
from google.rpc import status_pb2
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from tests.sidecar.conftest import MakeSidecar
from tests.sidecar.helpers import (
    SidecarProcess,
    VerdictServer,
    serve_config,
    synthetic_session,
    wait_for,
)

pytestmark = pytest.mark.slow


def _post(port: int, body: bytes, content_type: str, **headers: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("POST", "/v1/traces", body=body, headers={"Content-Type": content_type, **headers})
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return response.status, data


def _scrape(port: int) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, ""


# json.loads reads UTF-16 and UTF-32 bodies too: the clean-up must not see only UTF-8 bytes
@pytest.mark.parametrize("encoding", ["utf-8", "utf-16-le", "utf-32"])
def test_lone_surrogate_in_json_becomes_replacement_char(
    make_sidecar: MakeSidecar, encoding: str
) -> None:
    verdicts = VerdictServer()
    sidecar = None
    try:
        sidecar = make_sidecar(
            sessions={"idle_timeout_s": 60, "end_grace_s": 0.1},
            metrics_endpoint="127.0.0.1:0",
            export={"enabled": True, "endpoint": verdicts.endpoint, "insecure": True},
        )
        assert sidecar.http is not None and sidecar.endpoints is not None
        metrics_port = int(sidecar.endpoints.metrics.rpartition(":")[2])  # type: ignore[union-attr]
        document = json_format.MessageToJson(encode_spans(synthetic_session("surrogate")))
        assert '"bench-agent"' in document
        # the JSON escape of a lone high surrogate, as a buggy client library writes it
        body = document.replace('"bench-agent"', '"bench\\ud800agent"').encode(encoding)
        status, _ = _post(sidecar.http.port, body, "application/json")
        assert status == 200
        assert wait_for(lambda: "surrogate" in verdicts.received.sessions(), 20)
        [span] = [
            s for s in verdicts.received.eval_spans if s["attrs"]["session.id"] == "surrogate"
        ]
        assert span["attrs"]["gen_ai.agent.name"] == "bench\ufffdagent"
        # the metrics sink is flushed after the verdict sink: its series may come a moment later
        label = 'gen_ai_agent_name="bench\ufffdagent"'
        assert wait_for(lambda: label in _scrape(metrics_port)[1], 10)
        for _ in range(2):  # every later scrape works too
            status, text = _scrape(metrics_port)
            assert status == 200
            assert 'gen_ai_agent_name="bench\ufffdagent"' in text
    finally:
        if sidecar is not None:  # before its endpoint, or it retries until its deadline
            sidecar.stop()
        verdicts.stop()


def _with_lone_surrogates(encoding: str) -> tuple[bytes, str, str]:
    """(body, content type, the session id spanjudge should read) of one request whose session
    id holds a lone surrogate, and whose expected skill, named in JSON text inside an attribute
    value, holds another (`\\udc00`, the escape, in that text). In JSON the first is the escape
    `\\ud800`, bytes that are not UTF-8, or the surrogate's own bytes; in protobuf, the
    surrogate's bytes. The Collector passes such bytes on unchecked; each reads as one U+FFFD,
    in JSON as in protobuf, so a session sent both ways is one session."""
    request = encode_spans(synthetic_session("s-SUR"))  # SUR: as long as its bytes below
    for resource in request.resource_spans:
        for scope in resource.scope_spans:
            for span in scope.spans:
                if span.name.startswith("invoke_agent"):
                    expected = span.attributes.add(key="spanjudge.expected_skills")
                    expected.value.string_value = json.dumps(["csv-NESTED"])
    if encoding == "json":
        text = json_format.MessageToJson(request, indent=None)
        assert text.count("SUR") == 3 and text.count("NESTED") == 1
        body = text.replace("SUR", "\\ud800").replace("NESTED", "\\\\udc00").encode()
        return body, "application/json", "s-\ufffd"
    if encoding == "json-bytes":  # as the Collector writes JSON: the bytes it was given
        text = json_format.MessageToJson(request, indent=None).replace("NESTED", "\\\\udc00")
        body = text.encode().replace(b"SUR", b"\xc0\xff\xfe")
        return body, "application/json", "s-\ufffd\ufffd\ufffd"
    if encoding == "json-surrogate-bytes":  # what protobuf carries below, in JSON
        text = json_format.MessageToJson(request, indent=None).replace("NESTED", "\\\\udc00")
        body = text.encode().replace(b"SUR", b"\xed\xa0\x80")
        return body, "application/json", "s-\ufffd\ufffd\ufffd"
    data = request.SerializeToString()
    assert data.count(b"SUR") == 3 and data.count(b"NESTED") == 1
    body = data.replace(b"SUR", b"\xed\xa0\x80").replace(b"NESTED", b"\\udc00")
    return body, "application/x-protobuf", "s-\ufffd\ufffd\ufffd"


@pytest.mark.parametrize("encoding", ["json", "json-bytes", "json-surrogate-bytes", "protobuf"])
@pytest.mark.parametrize("workers", [1, 2])
def test_lone_surrogates_in_the_session_id_and_in_json_text_reach_the_verdicts_as_u_fffd(
    tmp_path: Path, workers: int, encoding: str
) -> None:
    verdicts = VerdictServer()
    export = {"enabled": True, "endpoint": verdicts.endpoint, "insecure": True}
    config = serve_config(tmp_path, workers=workers, http_endpoint="127.0.0.1:0", export=export)
    sidecar = SidecarProcess(tmp_path, config)
    body, content_type, session = _with_lone_surrogates(encoding)
    try:
        sidecar.start()
        port = int(sidecar.endpoints["http"].rpartition(":")[2])
        status, _ = _post(port, body, content_type)
        assert status == 200
        assert wait_for(lambda: session in verdicts.received.log_ids(), 30)
        assert wait_for(lambda: session in verdicts.received.span_ids(), 10)
        (span,) = verdicts.received.eval_spans
        (loaded,) = [e for e in span["events"] if e["gen_ai.evaluation.name"] == "skill_loaded"]
        assert loaded["gen_ai.skill.name"] == "csv-\ufffd" and loaded["spanjudge.outcome"] == "fail"
        # every verdict arrived as a span event and as a log record
        assert verdicts.received.log_ids() == verdicts.received.span_ids()
    finally:
        if sidecar.proc is not None:  # before its endpoint, or it retries until its deadline
            sidecar.terminate()
        verdicts.stop()
    assert "Traceback" not in sidecar.log.read_text()


def _request(session_id: str) -> bytes:
    return encode_spans(synthetic_session(session_id)).SerializeToString()


def test_multi_member_gzip_is_decoded_whole(make_sidecar: MakeSidecar) -> None:
    verdicts = VerdictServer()
    sidecar = None
    try:
        sidecar = make_sidecar(
            sessions={"idle_timeout_s": 60, "end_grace_s": 0.1},
            export={"enabled": True, "endpoint": verdicts.endpoint, "insecure": True},
        )
        assert sidecar.http is not None
        # two members: concatenated protobuf messages merge into one request of both sessions
        body = gzip.compress(_request("member-1")) + gzip.compress(_request("member-2"))
        status, _ = _post(
            sidecar.http.port, body, "application/x-protobuf", **{"Content-Encoding": "gzip"}
        )
        assert status == 200
        assert wait_for(lambda: {"member-1", "member-2"} <= set(verdicts.received.sessions()))
    finally:
        if sidecar is not None:  # before its endpoint, or it retries until its deadline
            sidecar.stop()
        verdicts.stop()


@pytest.mark.parametrize("trailer", [b"garbage", b"\x1f\x8b\x08\x00truncated"])
def test_trailing_garbage_after_gzip_is_400(make_sidecar: MakeSidecar, trailer: bytes) -> None:
    sidecar = make_sidecar()
    assert sidecar.http is not None
    body = gzip.compress(_request("trailer")) + trailer
    status, data = _post(
        sidecar.http.port, body, "application/x-protobuf", **{"Content-Encoding": "gzip"}
    )
    assert status == 400
    assert "gzip" in status_pb2.Status.FromString(data).message
    assert sidecar.spool.requests == 0  # nothing of it was acknowledged


def test_oversized_body_is_read_so_the_client_sees_413(make_sidecar: MakeSidecar) -> None:
    sidecar = make_sidecar(input={"max_request_bytes": 64 * 1024})
    assert sidecar.http is not None
    body = b"\x00" * (8 * 1024 * 1024)  # far more than the socket buffers hold
    with socket.create_connection(("127.0.0.1", sidecar.http.port), timeout=30) as sock:
        sock.sendall(
            b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
        )
        sock.sendall(body)  # a broken pipe here is what the OTLP exporters retry on
        response = sock.makefile("rb").readline()
    assert response.startswith(b"HTTP/1.1 413")
