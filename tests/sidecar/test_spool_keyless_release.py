"""A session's key-less spans (joined to it by their trace) leave the spool with it: once its
verdicts are confirmed nothing of its trace is left to replay, whichever came first, the span
that carries the session key or those that do not."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import Tracer

from spanjudge import CollectingSink, semconv
from spanjudge.config import parse_config
from spanjudge.engine import Engine
from spanjudge.sidecar.config import InputConfig
from spanjudge.sidecar.intake import FORMAT_PROTOBUF, decode_body
from spanjudge.sidecar.spool import Spool
from spanjudge.sidecar.worker import Worker
from spanjudge.spans.otlp_json import sdk_spans_to_request
from tests.conftest import recorded
from tests.sidecar.helpers import wait_for

CONFIG = parse_config({"sessions": {"end_grace_s": 0.05}})


def _trace() -> tuple[list[ReadableSpan], list[ReadableSpan]]:
    """One agent turn whose root carries the session key and its end marker; its two tool
    calls carry none. Returns (the keyed root, the key-less tool calls)."""

    def body(tracer: Tracer) -> None:
        root = {
            semconv.GEN_AI_OPERATION_NAME: semconv.OP_INVOKE_AGENT,
            semconv.SESSION_ID: "joined",
            semconv.SJ_SESSION_END: True,
        }
        with tracer.start_as_current_span("invoke_agent a", attributes=root):
            for name in ("read_file", "write_file"):
                tool = {
                    semconv.GEN_AI_OPERATION_NAME: semconv.OP_EXECUTE_TOOL,
                    semconv.GEN_AI_TOOL_NAME: name,
                }
                with tracer.start_as_current_span(f"execute_tool {name}", attributes=tool):
                    pass

    spans = recorded(body)
    keyed = [s for s in spans if s.attributes and semconv.SESSION_ID in s.attributes]
    return keyed, [s for s in spans if s not in keyed]


def _worker(path: Path, sink: CollectingSink) -> Worker:
    return Worker(
        Engine(CONFIG),
        [sink],
        Spool(str(path), max_bytes=64 * 1024 * 1024),
        policy=CONFIG.policy,
        limits=CONFIG.limits,
        checks=InputConfig(),
        tick_interval_s=0.01,
    )


def _submit(worker: Worker, spans: list[ReadableSpan]) -> None:
    body = bytes(sdk_spans_to_request(spans).SerializeToString())
    decoded = decode_body(body, FORMAT_PROTOBUF, CONFIG.limits, InputConfig())
    worker.submit(body, FORMAT_PROTOBUF, decoded.records, decoded.sizes)


@pytest.mark.parametrize("keyed_first", [True, False])
def test_key_less_spans_of_a_session_leave_the_spool_with_it(
    tmp_path: Path, keyed_first: bool
) -> None:
    path = tmp_path / "spool.db"
    keyed, keyless = _trace()
    sink = CollectingSink()
    worker = _worker(path, sink)
    worker.start()
    try:
        for spans in (keyed, keyless) if keyed_first else (keyless, keyed):
            _submit(worker, spans)
        assert wait_for(lambda: worker.evaluated_sessions == 1)
        assert [len(r.trajectory.steps) > 0 for r in sink.results] == [True]
        assert worker.spool.requests == 0
    finally:
        worker.stop(evaluate_open=False, deadline=time.monotonic() + 10)
        worker.spool.close()
    restarted = _worker(path, CollectingSink())
    try:
        assert restarted.replay() == 0  # nothing of the session is owed an evaluation
    finally:
        restarted.spool.close()
