"""Recognition never raises on odd but well-formed spans: any value under the attributes the
presets read, on spans named as each convention names them (a property test)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from spanjudge.engine import Engine
from spanjudge.sessions.store import ClosedSession
from spanjudge.spans.record import SpanRecord

NAMES = [
    "invoke_agent a",
    "chat m",
    "execute_tool load_skill",
    "execute_tool exec_command",
    "haystack.agent.run",
    "haystack.agent.step.llm",
    "haystack.agent.step.tool",
    "claude_code.interaction",
    "claude_code.llm_request",
    "claude_code.tool",
    "call_llm",
    "LangGraph",
    "tools/call x",
    "tool call",
]
KEYS = [
    "gen_ai.operation.name",
    "gen_ai.tool.name",
    "gen_ai.tool.call.id",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.tool.definitions",
    "gen_ai.usage.input_tokens",
    "gen_ai.skill.name",
    "gen_ai.prompt.0.content",
    "gen_ai.completion.0.tool_calls.0.name",
    "gcp.vertex.agent.llm_request",
    "gcp.vertex.agent.tool_call_args",
    "error.type",
    "openinference.span.kind",
    "tool.name",
    "input.value",
    "output.value",
    "llm.output_messages.0.message.content",
    "llm.output_messages.0.message.tool_calls.0.tool_call.function.name",
    "llm.input_messages.0.message.role",
    "llm.finish_reason",
    "haystack.tool.name",
    "haystack.agent.step.tool.input",
    "haystack.agent.step.tool.output",
    "haystack.agent.input",
    "haystack.agent.output",
    "haystack.agent.step.llm.output",
    "tool_name",
    "tool_input",
    "x.toolCall.name",
    "x.toolCall.args",
    "x.toolCall.result",
    "x.prompt.messages",
    "x.response.text",
    "new_context",
    "skill_name",
]
JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "role",
                    "parts",
                    "type",
                    "content",
                    "name",
                    "id",
                    "arguments",
                    "response",
                    "status",
                    "messages",
                    "replies",
                    "meta",
                    "usage",
                    "text",
                    "tool_call",
                    "cmd",
                    "skill",
                ]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)
VALUES = (
    st.text(max_size=40)
    | st.sampled_from(
        [
            "TOOL",
            "LLM",
            "AGENT",
            "CHAIN",
            "chat",
            "execute_tool",
            "invoke_agent",
            "cat .agents/x/SKILL.md",
            "---\nname: x\ndescription: y\n---\nbody",
        ]
    )
    | JSONISH.map(json.dumps)
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.booleans()
    | st.lists(st.text(max_size=5), max_size=3).map(tuple)
)


@st.composite
def spans(draw):  # type: ignore[no-untyped-def]
    count = draw(st.integers(min_value=1, max_value=6))
    out = []
    for i in range(count):
        parent = draw(st.sampled_from([None, *range(1, i + 1)])) if i else None
        out.append(
            SpanRecord(
                trace_id="a" * 32,
                span_id=format(i + 1, "016x"),
                parent_span_id=format(parent, "016x") if parent else None,
                name=draw(st.sampled_from(NAMES)),
                start_unix_nano=draw(st.integers(min_value=0, max_value=100)),
                end_unix_nano=200,
                status=draw(st.sampled_from(["ok", "error", "unset"])),
                attributes=draw(st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=6)),
            )
        )
    return out


ENGINE = Engine()


@settings(max_examples=300, deadline=None)
@given(spans())
def test_recognition_never_raises_on_odd_spans(records: list[SpanRecord]) -> None:
    closed = ClosedSession(
        key="s", key_source="t", revision=1, reason="end_of_input", spans=tuple(records)
    )
    trajectory = ENGINE.trajectory(closed)
    assert trajectory.span_count == len(records)
    assert all(x.status in ("loaded", "failed", "unresolved") for x in trajectory.skill_loads)
    assert all(x.status != "loaded" or x.skill for x in trajectory.skill_loads)


def test_message_parts_that_are_no_list_cost_no_step() -> None:
    """`"parts": true` (found by the property test above): the call is still a tool call
    (the preset used to raise, losing the span, logged as a preset failure)."""
    engine = Engine()
    records = [
        SpanRecord(
            trace_id="a" * 32,
            span_id="0000000000000001",
            parent_span_id=None,
            name="execute_tool load_skill",
            start_unix_nano=0,
            end_unix_nano=200,
            status="ok",
            attributes={"gen_ai.input.messages": value},
        )
        for value in ('{"parts":true}', '[{"role":"user","parts":7}]')
    ]
    for record in records:
        steps = engine.recognisers.recognise_span(record)
        assert [s.name for s in steps] == ["load_skill"], record.attributes
    assert engine.recognisers.errors == 0
