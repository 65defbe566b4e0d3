"""The tool results a model call's input sends back are read per message, and each message's
results are the same wherever it appears (every later call repeats the history): a call's
results are still its own, in its own order, whatever another call held."""

from __future__ import annotations

import json

from spanjudge.recognition.registry import RecogniserRegistry
from spanjudge.spans.record import SpanEvent, SpanRecord
from spanjudge.trajectory.steps import ToolResult


def _results(call_id: str, text: str, status: str = "success") -> str:
    block = {"toolUseId": call_id, "status": status, "content": [{"text": text}]}
    return json.dumps([{"toolResult": block}])


def _model_call(span_id: str, *contents: str) -> SpanRecord:
    events = [
        SpanEvent(name="gen_ai.user.message", time_unix_nano=1, attributes={"content": "[]"}),
        *(
            SpanEvent(name="gen_ai.tool.message", time_unix_nano=2, attributes={"content": c})
            for c in contents
        ),
        SpanEvent(
            name="gen_ai.choice",
            time_unix_nano=3,
            attributes={"message": json.dumps([{"text": "done"}]), "finish_reason": "end_turn"},
        ),
    ]
    return SpanRecord(
        trace_id="a" * 32,
        span_id=span_id,
        parent_span_id=None,
        name="chat",
        start_unix_nano=1,
        end_unix_nano=2,
        attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"},
        events=tuple(events),
    )


def _sent_back(span: SpanRecord) -> tuple[ToolResult, ...]:
    (step,) = RecogniserRegistry.default().recognise_span(span)
    return step.tool_results


def test_each_call_keeps_the_first_result_for_a_call_id_in_its_own_input() -> None:
    first = _results("tooluse_1", "north 1200")
    again = _results("tooluse_1", "south 800")
    assert _sent_back(_model_call("1" * 16, first)) == (
        ToolResult(call_id="tooluse_1", text="north 1200"),
    )
    # the same message, read before, comes after another result for that call here
    assert _sent_back(_model_call("2" * 16, again, first)) == (
        ToolResult(call_id="tooluse_1", text="south 800"),
    )


def test_a_repeated_history_gives_every_result_and_an_error_stays_an_error() -> None:
    ok = _results("tooluse_1", "north 1200")
    failed = _results("tooluse_2", "no such file", status="error")
    _sent_back(_model_call("3" * 16, ok))
    assert _sent_back(_model_call("4" * 16, ok, failed)) == (
        ToolResult(call_id="tooluse_1", text="north 1200"),
        ToolResult(call_id="tooluse_2", text='{"error": "no such file", "status": "error"}'),
    )
