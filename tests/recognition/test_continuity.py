"""A session whose earlier turns never arrived is not judged as whole (recognition/continuity.py).

Real framework traces: every fixture session, whole, is left alone; a multi-turn session without
its first turn (what a replica sees after resharding) is caught in each convention whose traces
record model input, and its absence-based verdicts become `prior_turns_missing`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from spanjudge.engine import Engine
from spanjudge.expectations import ExpectationResolver, load_expectations_file
from spanjudge.reasons import PRIOR_TURNS_MISSING
from spanjudge.recognition.continuity import missing_prior_turns
from spanjudge.sessions.keys import session_key
from spanjudge.sessions.store import ClosedSession
from spanjudge.spans.files import read_input
from spanjudge.spans.record import SpanRecord
from tests.conftest import FIXTURES

# Conventions whose fixtures record model input messages (Claude Code's spans do not; the
# MCP and custom-loader sets hold no multi-turn session).
WITH_MESSAGES = (
    "adk",
    "adk_legacy",
    "agent_framework",
    "deepagents",
    "genai_manual",
    "haystack",
    "openai_agents",
    "openllmetry",
    "smolagents",
    "strands",
)


def _sessions(path: Path) -> dict[str, list[SpanRecord]]:
    spans = [span for chunk in read_input(str(path)) for span in chunk.spans]
    # as the session store does: a key on any span of a trace (often only its root) keys it all
    keys: dict[str, str] = {}
    for span in spans:
        found = session_key(span, ())
        if found:
            keys.setdefault(span.trace_id, found[0])
    out: dict[str, list[SpanRecord]] = {}
    for span in spans:
        out.setdefault(keys.get(span.trace_id, span.trace_id), []).append(span)
    return out


def _closed(key: str, spans: list[SpanRecord]) -> ClosedSession:
    return ClosedSession(
        key=key, key_source="session.id", revision=1, reason="idle", spans=tuple(spans)
    )


def _without_first_turn(spans: list[SpanRecord]) -> list[SpanRecord]:
    first = min(spans, key=lambda s: s.start_unix_nano).trace_id
    return [s for s in spans if s.trace_id != first]


def _all_sessions() -> Iterator[tuple[str, str, list[SpanRecord]]]:
    for path in sorted(FIXTURES.glob("*/*.jsonl")):
        for key, spans in _sessions(path).items():
            yield path.name, key, spans


def test_whole_sessions_are_whole() -> None:
    engine = Engine()
    seen = 0
    for name, key, spans in _all_sessions():
        trajectory = engine.trajectory(_closed(key, spans))
        assert trajectory.prior_turns_missing is None, (name, key)
        assert trajectory.complete, (name, key)
        seen += 1
    assert seen > 100


@pytest.mark.parametrize("convention", WITH_MESSAGES)
def test_later_turns_alone_are_caught(convention: str) -> None:
    engine = Engine()
    multi = {
        key: spans
        for path in sorted((FIXTURES / convention).glob("*.jsonl"))
        for key, spans in _sessions(path).items()
        if len({s.trace_id for s in spans}) > 1
    }
    assert multi, convention
    for key, spans in multi.items():
        trajectory = engine.trajectory(_closed(key, _without_first_turn(spans)))
        assert not trajectory.complete, key
        assert trajectory.prior_turns_missing is not None, key
        assert "1 earlier user request" in trajectory.prior_turns_missing, key


def test_the_first_turn_alone_is_whole() -> None:
    # The old owner keeps turn 1: nothing in it points at turns before it.
    spans = _sessions(FIXTURES / "strands" / "strands_default.jsonl")["strands-default-multi-turn"]
    first = min(spans, key=lambda s: s.start_unix_nano).trace_id
    trajectory = Engine().trajectory(_closed("m", [s for s in spans if s.trace_id == first]))
    assert missing_prior_turns(trajectory, spans) is None


def test_absence_verdicts_on_later_turns_become_prior_turns_missing() -> None:
    # The scenario loads csv-report in turn 1 and answers from memory in turns 2 and 3.
    path = FIXTURES / "strands" / "strands_default.jsonl"
    spans = _sessions(path)["strands-default-multi-turn"]
    engine = Engine()
    engine.add_expectations(
        ExpectationResolver(load_expectations_file(str(path.parent / "expectations.yaml")))
    )
    whole = {
        v.evaluator: v
        for v in engine.evaluate(_closed("strands-default-multi-turn", spans)).verdicts
    }
    assert whole["skill_loaded"].outcome == "pass"

    later = engine.evaluate(_closed("strands-default-multi-turn", _without_first_turn(spans)))
    verdicts = {v.evaluator: v for v in later.verdicts}
    loaded = verdicts["skill_loaded"]
    # Without the check this reads "required skill 'csv-report' was never loaded": a fail.
    assert loaded.outcome == "not_evaluated"
    assert loaded.reason == PRIOR_TURNS_MISSING
    assert loaded.details and loaded.details["outcome_on_turns_held"] == "fail"
    assert "replays 1 earlier user request" in loaded.explanation
    assert not later.trajectory.complete
