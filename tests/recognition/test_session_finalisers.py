"""A preset's finaliser runs on every session, also on steps and spans it did not recognise
itself: spans another recogniser claimed first, or steps a declared convention named after it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spanjudge.config import Limits, parse_config
from spanjudge.recognition.registry import RecogniserRegistry
from spanjudge.spans.files import read_input
from spanjudge.spans.record import SpanRecord
from spanjudge.trajectory.steps import Step
from tests.conftest import FIXTURES
from tests.conftest import span as made_span


def _sessions(path: Path) -> list[list[SpanRecord]]:
    sessions: dict[object, list[SpanRecord]] = {}
    for chunk in read_input(str(path), Limits()):
        for span in chunk.spans:
            sessions.setdefault(span.attr("session.id") or span.trace_id, []).append(span)
    return list(sessions.values())


class _ClaimsEveryClaudeCodeSpan:
    """A plugin that reads Claude Code spans itself: the preset is never asked about them, but
    its finaliser still reads those spans (their outcomes, skill bodies, final answers)."""

    name = "mine"

    def recognise(self, span: SpanRecord) -> list[Step] | None:
        return [] if span.name.startswith("claude_code.") else None


def test_a_preset_whose_spans_another_recogniser_claims_still_finalises_its_sessions() -> None:
    registry = RecogniserRegistry(
        [_ClaimsEveryClaudeCodeSpan(), *RecogniserRegistry.default().recognisers]
    )
    # the detailed file's model calls carry their new context: a Skill call the harness refused
    # ("Unknown skill: csv-reports") is a failed load only the finaliser adds, from the
    # model-call span
    sessions = _sessions(FIXTURES / "claude_code" / "claude_code_detailed.jsonl")
    failed = [
        step.skill
        for spans in sessions
        for step in registry.recognise_session(spans)
        if step.kind == "skill_load" and step.skill_status == "failed"
    ]
    assert failed == ["csv-reports"]
    assert registry.errors == 0


def _attr(key: str, value: str) -> dict[str, object]:
    return {"key": key, "value": {"stringValue": value}}


# A turn span and its model call, read by a convention declared in the configuration.
_TRACE = "0af7651916cd43dd8448eb211c80319c"
_ASKED = "What is 2+2?"
_CONVENTION_SPANS = [
    {
        "traceId": _TRACE,
        "spanId": "b7ad6b7169203331",
        "name": "agent.run",
        "startTimeUnixNano": "1768478400000000000",
        "endTimeUnixNano": "1768478400090000000",
        "attributes": [_attr("session.id", "s1")],
    },
    {
        "traceId": _TRACE,
        "spanId": "b7ad6b7169203332",
        "parentSpanId": "b7ad6b7169203331",
        "name": "llm.call",
        "startTimeUnixNano": "1768478400010000000",
        "endTimeUnixNano": "1768478400050000000",
        "attributes": [
            _attr("session.id", "s1"),
            _attr("my.text", "The answer is 4."),
            _attr(
                "gen_ai.input.messages",
                json.dumps([{"role": "user", "parts": [{"type": "text", "content": _ASKED}]}]),
            ),
        ],
    },
]


@pytest.mark.parametrize("name", ["traceloop", "claude_code"])
def test_a_convention_named_as_a_preset_gets_that_presets_finaliser(
    name: str, tmp_path: Path
) -> None:
    """Steps under a preset's name that no span of its own made (a declared convention called
    so) are finalised by the preset: Traceloop's fills a turn's request from its first model
    call, Claude Code's turns the turn's last model reply into the final answer."""
    traces = tmp_path / "t.jsonl"
    scope = {"scope": {"name": "my-agent"}, "spans": _CONVENTION_SPANS}
    line = {"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [scope]}]}
    traces.write_text(json.dumps(line) + "\n")
    convention = {
        "session_key": "session.id",
        "turn": {"span_name": "agent.run"},
        "model_call": {"span_name": "llm.call", "text": "my.text"},
    }
    declared = parse_config({"conventions": {name: convention}}).sections["conventions"]
    (spans,) = _sessions(traces)
    steps = RecogniserRegistry.default(declared).recognise_session(spans)
    if name == "traceloop":
        assert [s.text for s in steps if s.kind == "agent_turn"] == [_ASKED]
    else:
        assert [s.name for s in steps if s.kind == "final_answer"] == ["llm.call"]


def test_a_tool_called_with_a_bare_number_leaves_the_session_finalised() -> None:
    # OpenInference records a call's input as `input.value`, here a double rather than text;
    # the answer channel check (is this call how the answer was delivered?) reads its texts.
    kind = "openinference.span.kind"
    spans = [
        made_span(
            1,
            name="agent",
            attrs={kind: "AGENT", "input.value": "What is 6 times 7?", "output.value": "42"},
        ),
        made_span(
            2,
            parent=1,
            name="calculator",
            start=1,
            attrs={
                kind: "TOOL",
                "tool.name": "calculator",
                "input.value": 6.5,
                "output.value": "42",  # the answer: the call is asked whether it delivered it
            },
        ),
    ]
    registry = RecogniserRegistry.default()
    steps = registry.recognise_session(spans)
    assert registry.errors == 0
    assert [(s.kind, s.name) for s in steps if s.kind in ("tool_call", "final_answer")] == [
        ("final_answer", "agent"),
        ("tool_call", "calculator"),
    ]
