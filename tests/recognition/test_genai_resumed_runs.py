"""A run resumed after a human approved a tool call (OpenAI Agents under OpenLLMetry's GenAI
instrumentation, fixtures/openai_agents_custom_loader/): two traces, one request, one call."""

from __future__ import annotations

import json

from spanjudge.recognition.reconcile import reconcile
from spanjudge.recognition.registry import RecogniserRegistry
from spanjudge.spans.files import read_input
from spanjudge.spans.record import SpanRecord
from tests.conftest import FIXTURES

FOLDER = FIXTURES / "openai_agents_custom_loader"
SESSION = "oa-custom-openllmetry-approval-round-trip"


def _spans() -> list[SpanRecord]:
    spans = [
        s for c in read_input(str(FOLDER / "custom_loader_openllmetry.jsonl")) for s in c.spans
    ]
    traces = {s.trace_id for s in spans if s.attributes.get("session.id") == SESSION}
    return [s for s in spans if s.trace_id in traces]


def _record() -> dict[str, object]:
    records = json.loads((FOLDER / "scenarios.json").read_text())["sessions"]
    found: dict[str, object] = next(r for r in records if r["session_id"] == SESSION)
    return found


def test_the_resumed_run_continues_the_request_and_its_call_counts_once() -> None:
    spans = _spans()
    assert len({s.trace_id for s in spans}) == 2  # the resumed run is a trace of its own
    tool_spans = [s for s in spans if s.name == "delete_file.tool"]
    assert [("gen_ai.tool.call.result" in s.attributes) for s in tool_spans] == [False, True]
    steps = reconcile(RecogniserRegistry.default().recognise_session(spans), spans)
    turns = [s for s in steps if s.kind == "agent_turn"]
    assert [t.continuation for t in sorted(turns, key=lambda t: t.start_unix_nano)] == [
        False,
        True,
    ]
    calls = [(s.name, s.arguments, s.result) for s in steps if s.kind == "tool_call"]
    logged = [(c["tool"], c["args"]) for c in _record()["calls"]]  # type: ignore[attr-defined]
    assert [(name, args) for name, args, _ in calls] == logged
    assert calls[0][2] == "deleted out/tmp.txt"
