"""OTLP log records on both receivers (`POST /v1/logs`, the gRPC `LogsService`): a content record
joins its span's session; a bad record gets a partial success naming its field; a record that is
no content is acknowledged and counted, not kept; malformed bodies and missing tokens get the
statuses traces get."""

from __future__ import annotations

import json
from typing import Any

import grpc
from google.protobuf import json_format
from google.rpc import status_pb2
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValueList
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs

from spanjudge.sidecar.server import Sidecar
from tests.sidecar.conftest import MakeSidecar
from tests.sidecar.helpers import wait_for
from tests.sidecar.raw_requests import NOW, TRACE, grpc_call, healthy, kv, post, request, span

LOGS_EXPORT = "/opentelemetry.proto.collector.logs.v1.LogsService/Export"
SPAN = b"\x01" * 8
USER = "Please summarise data/sales.csv."


def _content(span_id: str = SPAN.hex()) -> dict[str, Any]:
    """A `gen_ai.user.message` record naming ``span_id`` of `TRACE`, as OTLP JSON."""
    return {
        "timeUnixNano": str(NOW),
        "traceId": TRACE.hex(),
        "spanId": span_id,
        "eventName": "gen_ai.user.message",
        "body": {"kvlistValue": {"values": [{"key": "content", "value": {"stringValue": USER}}]}},
    }


def _json_logs(*records: dict[str, Any]) -> bytes:
    return json.dumps(
        {"resourceLogs": [{"scopeLogs": [{"scope": {"name": "agent"}, "logRecords": records}]}]}
    ).encode()


def _post_logs(
    sidecar: Sidecar, body: bytes, content_type: str, **headers: str
) -> tuple[int, bytes]:
    status, _, data = post(sidecar, body, content_type, path="/v1/logs", **headers)
    return status, data


def _grpc_logs(sidecar: Sidecar, body: bytes, metadata: Any = None) -> tuple[grpc.StatusCode, Any]:
    return grpc_call(
        sidecar, body, metadata, method=LOGS_EXPORT, response=ExportLogsServiceResponse
    )


def test_a_content_record_joins_its_span_and_a_bad_one_is_named(make_sidecar: MakeSidecar) -> None:
    sidecar = make_sidecar()
    assert post(sidecar, request(span(SPAN)))[0] == 200
    body = _json_logs(
        _content(),
        _content(span_id="abcdef"),  # a span id of 3 bytes
        {"timeUnixNano": str(NOW), "body": {"stringValue": "GET /healthz 200"}},  # a plain line
    )
    status, data = _post_logs(sidecar, body, "application/json")
    assert status == 200
    response = json_format.Parse(data, ExportLogsServiceResponse())
    assert response.partial_success.rejected_log_records == 1
    assert "logRecords[1].spanId" in response.partial_success.error_message
    # the content record is in the session of the span it names, beside that span
    assert wait_for(lambda: len(sidecar.worker.store.open["bad-input"].spans) == 2)
    assert healthy(sidecar)


def test_the_logs_service_over_grpc_takes_protobuf(make_sidecar: MakeSidecar) -> None:
    sidecar = make_sidecar()
    assert post(sidecar, request(span(SPAN)))[0] == 200
    record = LogRecord(
        time_unix_nano=NOW,
        trace_id=TRACE,
        span_id=SPAN,
        event_name="gen_ai.user.message",
        body=AnyValue(kvlist_value=KeyValueList(values=[kv("content", USER)])),
    )
    body = ExportLogsServiceRequest(
        resource_logs=[ResourceLogs(scope_logs=[ScopeLogs(log_records=[record])])]
    ).SerializeToString()
    code, response = _grpc_logs(sidecar, body)
    assert code == grpc.StatusCode.OK
    assert not response.HasField("partial_success")
    assert wait_for(lambda: len(sidecar.worker.store.open["bad-input"].spans) == 2)
    code, details = _grpc_logs(sidecar, b"\x0a\xff\xff\xff\xff\x0f")
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert "not a valid OTLP ExportLogsServiceRequest" in details


def test_records_that_hold_no_content_are_acknowledged_and_not_kept(
    make_sidecar: MakeSidecar,
) -> None:
    sidecar = make_sidecar()
    body = _json_logs(
        {"timeUnixNano": str(NOW), "body": {"stringValue": "GET /healthz 200"}},
        # an event emitted outside any span: there is no session to join
        {"timeUnixNano": str(NOW), "eventName": "gen_ai.user.message", "body": {}},
    )
    status, data = _post_logs(sidecar, body, "application/json")
    assert status == 200
    assert not json_format.Parse(data, ExportLogsServiceResponse()).HasField("partial_success")
    assert sidecar.handler.counts == {"ok": 1}
    assert not sidecar.worker.store.open and sidecar.worker.pending_spans == 0


def test_malformed_logs_bodies_get_400_with_a_message(make_sidecar: MakeSidecar) -> None:
    sidecar = make_sidecar()
    status, data = _post_logs(sidecar, b"\xff\xff garbage", "application/x-protobuf")
    assert status == 400
    assert "not a valid OTLP ExportLogsServiceRequest" in status_pb2.Status.FromString(data).message
    status, data = _post_logs(sidecar, b"{not json", "application/json")
    assert status == 400 and "not valid JSON" in json.loads(data)["message"]
    status, data = _post_logs(sidecar, _json_logs(_content(span_id="zz")), "application/json")
    assert status == 400
    assert "every log record was rejected" in json.loads(data)["message"]
    assert sidecar.handler.counts["invalid"] == 3
    assert healthy(sidecar)


def test_logs_need_the_token_traces_need(make_sidecar: MakeSidecar) -> None:
    sidecar = make_sidecar(auth={"bearer_token": "s3cret"})
    body = _json_logs(_content())
    assert _post_logs(sidecar, body, "application/json")[0] == 401
    code, _ = _grpc_logs(sidecar, ExportLogsServiceRequest().SerializeToString())
    assert code == grpc.StatusCode.UNAUTHENTICATED
    status, _ = _post_logs(sidecar, body, "application/json", Authorization="Bearer s3cret")
    assert status == 200
