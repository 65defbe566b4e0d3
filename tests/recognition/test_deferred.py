"""Built-in presets are imported when a span first shows their evidence
(`recognition/deferred.py`), and that changes no result: every fixture session gets the steps
that presets made up front give, also when another recogniser claims a preset's spans first."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from spanjudge.config import Limits, parse_config
from spanjudge.recognition.deferred import DEFERRED, DeferredPreset
from spanjudge.recognition.registry import RECOGNISERS, RecogniserRegistry
from spanjudge.spans.files import read_input
from spanjudge.spans.record import SpanRecord
from spanjudge.trajectory.steps import Step
from tests.conftest import FIXTURES
from tests.support.startup import modules_after

FILES = sorted(FIXTURES.glob("*/*.jsonl"))


def _sessions(path: Path) -> list[list[SpanRecord]]:
    sessions: dict[object, list[SpanRecord]] = {}
    for chunk in read_input(str(path), Limits()):
        for span in chunk.spans:
            sessions.setdefault(span.attr("session.id") or span.trace_id, []).append(span)
    return list(sessions.values())


def _made_up_front() -> RecogniserRegistry:
    """Every built-in preset made now, as before deferral."""
    return RecogniserRegistry(
        r.made if isinstance(r, DeferredPreset) else r
        for r in RecogniserRegistry.default().recognisers
    )


def test_each_deferred_preset_routes_by_the_evidence_its_class_declares() -> None:
    for name, evidence in DEFERRED.items():
        module, _, attr = RECOGNISERS.builtins[name].partition(":")
        preset_class = getattr(importlib.import_module(module), attr)
        assert preset_class.claim_evidence == evidence, name


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_fixture_session_gets_the_steps_of_presets_made_up_front(path: Path) -> None:
    deferred, eager = RecogniserRegistry.default(), _made_up_front()
    for spans in _sessions(path):
        assert deferred.recognise_session(spans) == eager.recognise_session(spans)
    assert deferred.errors == eager.errors == 0


class _ClaimsEveryClaudeCodeSpan:
    """A plugin that reads Claude Code spans itself: the preset is never asked about them, but
    its finaliser still reads those spans (their outcomes, skill bodies, final answers)."""

    name = "mine"

    def recognise(self, span: SpanRecord) -> list[Step] | None:
        return [] if span.name.startswith("claude_code.") else None


def test_a_preset_whose_spans_another_recogniser_claims_still_finalises_its_sessions() -> None:
    plugin = _ClaimsEveryClaudeCodeSpan()
    deferred = RecogniserRegistry([plugin, *RecogniserRegistry.default().recognisers])
    eager = RecogniserRegistry([plugin, *_made_up_front().recognisers])
    # the detailed file's model calls carry their new context: a Skill call the harness refused
    # ("Unknown skill") is a failed load only the finaliser adds, from the model-call span
    sessions = _sessions(FIXTURES / "claude_code" / "claude_code_detailed.jsonl")
    failed_loads = 0
    for spans in sessions:
        steps = deferred.recognise_session(spans)
        assert steps == eager.recognise_session(spans)
        failed_loads += sum(s.kind == "skill_load" and s.skill_status == "failed" for s in steps)
    assert failed_loads


def test_an_eval_of_one_framework_imports_only_the_presets_its_spans_show(
    tmp_path: Path,
) -> None:
    traces = FIXTURES / "claude_code" / "claude_code.jsonl"
    loaded = modules_after("eval", str(traces), "-q", "-o", str(tmp_path / "t.txt"), cwd=tmp_path)
    assert "spanjudge.recognition.claude_code" in loaded
    others = [f"spanjudge.recognition.{name}" for name in DEFERRED if name != "claude_code"]
    assert sorted(m for m in others if m in loaded) == []
    assert "session" in (tmp_path / "t.txt").read_text()


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
def test_a_convention_named_as_a_deferred_preset_still_gets_its_finaliser(
    name: str, tmp_path: Path
) -> None:
    """Steps under a preset's name that no span of its own made (a declared convention called
    so) are finalised by the preset, as when every preset was made up front: Traceloop's fills
    a turn's request from its first model call, Claude Code's turns the turn's last model reply
    into the final answer."""
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
    deferred = RecogniserRegistry.default(declared)
    eager = RecogniserRegistry([*declared, *_made_up_front().recognisers])
    (spans,) = _sessions(traces)
    steps = deferred.recognise_session(spans)
    assert steps == eager.recognise_session(spans)
    if name == "traceloop":
        assert [s.text for s in steps if s.kind == "agent_turn"] == [_ASKED]
    else:
        assert [s.name for s in steps if s.kind == "final_answer"] == ["llm.call"]
