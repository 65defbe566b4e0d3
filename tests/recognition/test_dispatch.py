"""The registry asks a preset about a span only when the span carries the evidence the preset
claims by (`claim_evidence`), and that changes no result: every fixture span gets what trying
every preset in order gives, and each built-in's evidence is necessary for it to claim a span."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spanjudge.config import Limits
from spanjudge.recognition.base import ClaimEvidence
from spanjudge.recognition.claude_code import ClaudeCodeRecogniser
from spanjudge.recognition.genai import GenAIRecogniser
from spanjudge.recognition.registry import RecogniserRegistry
from spanjudge.spans.files import read_input
from spanjudge.spans.record import SpanRecord
from spanjudge.trajectory.steps import Step

FIXTURES = sorted((Path(__file__).parents[2] / "fixtures").glob("*/*.jsonl"))


def _spans(path: Path) -> list[SpanRecord]:
    return [span for chunk in read_input(str(path), Limits()) for span in chunk.spans]


def _every_preset_in_order(registry: RecogniserRegistry, span: SpanRecord) -> list[Step]:
    """What the registry answered before it had routes: the first preset that claims wins."""
    for recogniser in registry.recognisers:
        steps = recogniser.recognise(span)
        if steps is not None:
            return steps
    return []


def _span(name: str, scope: str | None = None, **attributes: object) -> SpanRecord:
    return SpanRecord(
        trace_id="t" * 32,
        span_id="s" * 16,
        parent_span_id=None,
        name=name,
        start_unix_nano=1,
        end_unix_nano=2,
        attributes=attributes,  # type: ignore[arg-type]
        scope_name=scope,
    )


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_fixture_span_gets_what_asking_every_preset_gives(path: Path) -> None:
    registry = RecogniserRegistry.default()
    spans = _spans(path)
    assert spans
    for span in spans:
        assert registry.recognise_span(span) == _every_preset_in_order(registry, span)
    assert registry.errors == 0


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_preset_claims_no_fixture_span_without_its_evidence(path: Path) -> None:
    presets = [r for r in RecogniserRegistry.default().recognisers if hasattr(r, "claim_evidence")]
    assert len(presets) == 5
    for span in _spans(path):
        for preset in presets:
            evidence: ClaimEvidence = preset.claim_evidence  # type: ignore[attr-defined]
            if not (
                span.name.startswith(evidence.name_prefixes)
                or span.scope_name in evidence.scopes
                or any(key in span.attributes for key in evidence.attributes)
            ):
                assert preset.recognise(span) is None, (preset.name, span.name)


KEYS = [
    "openinference.span.kind",
    "traceloop.span.kind",
    "gen_ai.operation.name",
    "gen_ai.tool.name",
    "gen_ai.usage.input_tokens",
    "input.value",
    "output.value",
    "tool.name",
    "llm.model_name",
    "traceloop.entity.name",
    "traceloop.entity.output",
]
VALUES = st.none() | st.text(max_size=8) | st.sampled_from(["TOOL", "LLM", "AGENT", "CHAIN"])
SCOPES = st.none() | st.sampled_from(
    ["openinference.instrumentation.smolagents", "strands.telemetry.tracer", "x"]
)
NAMES = st.sampled_from(
    [
        "claude_code.tool",
        "claude_code.llm_request",
        "claude_code.interaction",
        "haystack.agent.run",
        "haystack.agent.step.tool",
        "chat m",
        "execute_tool x",
        "invoke_agent a",
        "FinalAnswerTool",
        "agent.run",
        "x",
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    names=st.lists(NAMES, min_size=1, max_size=4),
    scope=SCOPES,
    attributes=st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=4),
)
def test_any_span_gets_what_asking_every_preset_gives(
    names: list[str], scope: str | None, attributes: dict[str, object]
) -> None:
    registry = RecogniserRegistry.default()
    for name in names:  # the same route is used again for a repeated (scope, name)
        span = _span(name, scope, **attributes)
        assert registry.recognise_span(span) == _every_preset_in_order(registry, span)


class _CountingClaudeCode(ClaudeCodeRecogniser):
    claim_evidence = ClaudeCodeRecogniser.claim_evidence  # its own: the same promise

    def __init__(self) -> None:
        self.asked: list[str] = []

    def recognise(self, span: SpanRecord) -> list[Step] | None:
        self.asked.append(span.name)
        return super().recognise(span)


def test_a_preset_is_not_asked_about_a_span_without_its_evidence() -> None:
    counting = _CountingClaudeCode()
    registry = RecogniserRegistry([counting, GenAIRecogniser()])
    registry.recognise_session(
        [_span("chat m", **{"gen_ai.operation.name": "chat"}), _span("claude_code.tool")]
    )
    assert counting.asked == ["claude_code.tool"]


class _Widened(ClaudeCodeRecogniser):
    """Claims more than its base: without evidence of its own it is asked about every span."""

    def recognise(self, span: SpanRecord) -> list[Step] | None:
        return [] if span.name == "mine" else super().recognise(span)


class _Plugin:
    name = "plugin"

    def recognise(self, span: SpanRecord) -> list[Step] | None:
        return [] if span.name == "mine" else None


def test_a_recogniser_that_declares_no_evidence_of_its_own_is_asked_about_every_span() -> None:
    genai = GenAIRecogniser()
    mine = _span("mine", **{"gen_ai.operation.name": "invoke_agent"})
    for recogniser in (_Widened(), _Plugin()):
        assert RecogniserRegistry([recogniser, genai]).recognise_span(mine) == []
    replaced = ClaudeCodeRecogniser()
    replaced.recognise = _Plugin().recognise  # type: ignore[method-assign]
    assert RecogniserRegistry([replaced, genai]).recognise_span(mine) == []
    assert RecogniserRegistry([ClaudeCodeRecogniser(), genai]).recognise_span(mine) != []


def test_a_recogniser_added_to_the_list_later_is_asked() -> None:
    registry = RecogniserRegistry([GenAIRecogniser()])
    mine = _span("mine", **{"gen_ai.operation.name": "invoke_agent"})
    assert registry.recognise_span(mine) != []
    registry.recognisers.insert(0, _Plugin())
    assert registry.recognise_span(mine) == []
    assert registry.recognise_session([mine]) == []


def test_the_answer_channel_is_no_tool_call_in_a_session_without_openinference_steps() -> None:
    # OpenInference's finaliser reads every preset's steps for an answer handed to a tool;
    # a session none of whose steps is its own still gets that pass.
    trace = {"trace_id": "a" * 32, "start_unix_nano": 1, "end_unix_nano": 9}
    turn = SpanRecord(
        **trace,  # type: ignore[arg-type]
        span_id="1" * 16,
        parent_span_id=None,
        name="invoke_agent a",
        attributes={
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.output.messages": '[{"role": "assistant", "parts": '
            '[{"type": "text", "content": "42"}]}]',
        },
    )
    handed = SpanRecord(
        **trace,  # type: ignore[arg-type]
        span_id="2" * 16,
        parent_span_id="1" * 16,
        name="execute_tool answer",
        attributes={
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "answer",
            "gen_ai.tool.call.arguments": '{"answer": "42"}',
            "gen_ai.tool.call.result": "42",
        },
    )
    steps = RecogniserRegistry.default().recognise_session([turn, handed])
    assert {s.preset for s in steps} == {"genai"}
    assert [(s.kind, s.text) for s in steps if s.kind == "final_answer"] == [("final_answer", "42")]
    assert [s.kind for s in steps] == ["agent_turn", "final_answer"]
