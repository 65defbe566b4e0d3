"""A `session.id` that is no string or integer (an array of maps) is no session key: the span is
key-less, and `/metrics` counts it (`spanjudge_session_keys_refused_total`), once per span,
whichever evaluation process took it."""

from __future__ import annotations

import re
import time
import urllib.request
from pathlib import Path

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import (
    AnyValue,
    ArrayValue,
    KeyValue,
    KeyValueList,
)
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from tests.sidecar.helpers import SidecarProcess, wait_for
from tests.support.load import EXPORT

pytestmark = pytest.mark.slow
REFUSED = 5


def _span(i: int, session: AnyValue) -> Span:
    start = time.time_ns()
    return Span(
        trace_id=(1000 + i).to_bytes(16, "big"),
        span_id=(1000 + i).to_bytes(8, "big"),
        name="invoke_agent keys",
        start_time_unix_nano=start,
        end_time_unix_nano=start + 1_000_000,
        attributes=[
            KeyValue(key="gen_ai.operation.name", value=AnyValue(string_value="invoke_agent")),
            KeyValue(key="session.id", value=session),
        ],
    )


def _counter(text: str, name: str) -> float:
    return sum(float(v) for v in re.findall(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M))


@pytest.mark.parametrize("workers", [1, 2])
def test_refused_session_keys_are_counted_on_metrics(tmp_path: Path, workers: int) -> None:
    maps = AnyValue(
        array_value=ArrayValue(
            values=[
                AnyValue(kvlist_value=KeyValueList(values=[KeyValue(key="a", value=AnyValue())]))
            ]
        )
    )
    spans = [_span(i, maps) for i in range(REFUSED)]
    spans.append(_span(REFUSED, AnyValue(string_value="a-real-id")))
    body = ExportTraceServiceRequest(
        resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])]
    ).SerializeToString()
    config = {
        "sessions": {"idle_timeout_s": 60, "end_grace_s": 0.1},
        "serve": {
            "grpc_endpoint": "127.0.0.1:0",
            "http_endpoint": None,
            "metrics_endpoint": "127.0.0.1:0",
            "tick_interval_s": 0.05,
            "workers": workers,
            "spool": {"path": str(tmp_path / "spool.db")},
        },
    }
    sidecar = SidecarProcess(tmp_path, config).start()
    try:
        with grpc.insecure_channel(sidecar.endpoints["grpc"]) as channel:
            channel.unary_unary(EXPORT)(body, timeout=30)
        url = f"http://{sidecar.endpoints['metrics']}/metrics"

        def scrape() -> str:
            with urllib.request.urlopen(url, timeout=10) as response:
                return str(response.read().decode())

        name = "spanjudge_session_keys_refused_total"
        assert wait_for(lambda: _counter(scrape(), name) >= REFUSED, 30), scrape()
        time.sleep(0.5)  # nothing else comes: each span counted once
        assert _counter(scrape(), name) == REFUSED
    finally:
        assert sidecar.terminate() == 0
