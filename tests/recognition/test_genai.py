"""The GenAI recogniser against fixtures emitted by real instrumentation (Strands, Google ADK).

Expected values come from each generator's own record of what its scripted run did
(`scenarios.json`), and skill bodies from the SKILL.md files themselves.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from spanjudge.recognition.genai import GenAIRecogniser
from spanjudge.spans.files import read_input
from spanjudge.spans.record import SpanRecord
from spanjudge.trajectory.steps import Step

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
SKILLS = FIXTURES / "skills"
# Fixture sets whose spans are all GenAI semconv (the recogniser must claim every span).
GENAI_SETS = ("strands", "adk", "genai_manual")
CATALOGUE = {"csv-report", "incident-triage", "release-notes"}
SESSION_KEYS = ("gen_ai.conversation.id", "session.id")


@dataclass
class Session:
    record: dict[str, Any]
    spans: list[SpanRecord]
    steps: list[Step]


def _without_front_matter(text: str) -> str:
    if text.startswith("---"):
        text = text.split("---", 2)[2]
    return text.strip()


def _skill_body(name: str) -> str:
    return _without_front_matter((SKILLS / name / "SKILL.md").read_text(encoding="utf-8"))


_CACHE: dict[Path, dict[str, Session]] = {}


def _load(set_dir: Path) -> dict[str, Session]:
    """Recognise every span of a fixture set and group steps by the session their trace is in."""
    if set_dir in _CACHE:
        return _CACHE[set_dir]
    doc = json.loads((set_dir / "scenarios.json").read_text(encoding="utf-8"))
    spans_by_file: dict[str, list[SpanRecord]] = {}
    for name in {s["file"] for s in doc["sessions"]}:
        spans_by_file[name] = [
            span for chunk in read_input(str(set_dir / name)) for span in chunk.spans
        ]
    sessions: dict[str, Session] = {}
    for name, spans in spans_by_file.items():
        trace_session: dict[str, str] = {}
        for span in spans:
            for key in SESSION_KEYS:
                if isinstance(span.attributes.get(key), str):
                    trace_session[span.trace_id] = str(span.attributes[key])
        grouped: dict[str, list[SpanRecord]] = defaultdict(list)
        for span in spans:
            # no session attribute at all: the session is its trace
            grouped[trace_session.get(span.trace_id, span.trace_id)].append(span)
        for record in (s for s in doc["sessions"] if s["file"] == name):
            own = sorted(grouped[record["session_id"]], key=lambda s: s.start_unix_nano)
            recogniser = GenAIRecogniser()
            steps: list[Step] = []
            for span in own:
                # a span of an operation the conventions do not name as agent activity (an
                # event-loop cycle) is declined (None): it yields no step either way
                steps.extend(recogniser.recognise(span) or [])
            steps = recogniser.finalise(steps, own)
            steps.sort(key=lambda s: (s.start_unix_nano, s.seq))
            sessions[record["session_id"]] = Session(record, own, steps)
    _CACHE[set_dir] = sessions
    return sessions


def _params() -> list[Any]:
    params = []
    for set_name in GENAI_SETS:
        path = FIXTURES / set_name / "scenarios.json"
        if path.exists():
            doc = json.loads(path.read_text(encoding="utf-8"))
            for record in doc["sessions"]:
                key = (set_name, record["session_id"])
                params.append(pytest.param(key, id=record["session_id"]))
    return params


SESSIONS = _params()


def test_strands_fixtures_cover_every_mode() -> None:
    ids = {p.values[0][1] for p in SESSIONS if p.values[0][0] == "strands"}
    for mode in ("default", "latest", "attributes-only"):
        assert f"strands-{mode}-required-skill-followed" in ids
        assert f"strands-{mode}-load-failed-payload-error" in ids
    assert len([i for i in ids if i.startswith("strands-default-csv-summary-seed-")]) == 5


@pytest.fixture(params=SESSIONS)
def session(request: pytest.FixtureRequest) -> Session:
    set_name, session_id = request.param
    return _load(FIXTURES / set_name)[session_id]


def _of(session: Session, kind: str) -> list[Step]:
    return [s for s in session.steps if s.kind == kind]


def test_skill_loads_and_their_status(session: Session) -> None:
    loads = [{"skill": s.skill, "status": s.skill_status} for s in _of(session, "skill_load")]
    assert loads == session.record["skill_loads"]


def test_loaded_skills_keep_the_skill_md_body(session: Session) -> None:
    for step in _of(session, "skill_load"):
        if step.skill_status == "loaded" and step.skill in CATALOGUE:
            assert step.skill_body is not None
            # Some harnesses return the whole file, others the body after the front matter.
            assert _without_front_matter(step.skill_body) == _skill_body(step.skill or "")
        else:
            assert step.skill_body is None


def test_tool_calls_and_errors(session: Session) -> None:
    calls = _of(session, "tool_call")
    assert len(calls) == session.record["tool_calls"]
    assert sum(s.failed for s in calls) == session.record["errors"]
    assert all(s.name and s.arguments is not None for s in calls)


def test_model_calls_and_per_call_tokens(session: Session) -> None:
    calls = _of(session, "model_call")
    assert len(calls) == session.record["model_calls"]
    assert sum(s.input_tokens or 0 for s in calls) == session.record["input_tokens"]
    assert sum(s.output_tokens or 0 for s in calls) == session.record["output_tokens"]


def test_final_answer_of_the_last_turn(session: Session) -> None:
    answers = _of(session, "final_answer")
    if session.record["final_answer"] is None:  # the turn was aborted
        assert answers == []
    else:
        assert answers, "no final answer recognised"
        assert answers[-1].text == session.record["final_answer"]


def test_turns_and_request(session: Session) -> None:
    turn_spans = {s.span_id for s in _of(session, "agent_turn")}
    roots = [s for s in _of(session, "agent_turn") if s.parent_span_id not in turn_spans]
    assert len(roots) == session.record["turns"]
    assert roots[0].text == session.record["request"]
    assert all(s.text for s in roots)


def test_catalogue_from_system_prompts(session: Session) -> None:
    names = {entry.name for step in session.steps for entry in step.catalogue}
    assert names == CATALOGUE
    descriptions = {e.name: e.description for s in session.steps for e in s.catalogue}
    assert descriptions["csv-report"] == (
        "Summarise a CSV file of sales figures into a markdown report with totals per region."
    )


# The hand-instrumented fixtures record no tool schemas; Strands and ADK do.
@pytest.mark.parametrize("key", [p.values[0] for p in SESSIONS if p.values[0][0] != "genai_manual"])
def test_tool_schemas_recorded(key: tuple[str, str]) -> None:
    session = _load(FIXTURES / key[0])[key[1]]
    schemas: dict[str, Any] = {}
    for step in session.steps:
        schemas.update(step.tool_schemas)
    for step in _of(session, "tool_call"):
        assert "properties" in schemas[step.name], step.name


def test_spans_without_gen_ai_attributes_are_not_claimed() -> None:
    span = SpanRecord(
        trace_id="0" * 31 + "1",
        span_id="0" * 15 + "1",
        parent_span_id=None,
        name="GET /health",
        start_unix_nano=1,
        end_unix_nano=2,
        attributes={"http.request.method": "GET"},
    )
    assert GenAIRecogniser().recognise(span) is None
