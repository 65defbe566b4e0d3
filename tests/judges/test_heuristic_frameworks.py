"""Cases the heuristic must get right, on every fixture framework's own span shapes.

Each case starts from a fixture session recorded by real instrumentation and changes only the
words a user or a skill author would write, in the recorded file itself: the request and a
catalogue description (the weather case) or one line of the SKILL.md body (the required step).
Everything else (span layout, where the catalogue and the body live) stays as the framework wrote
it, so the judge is tested through each framework's recognition.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from spanjudge import CollectingSink
from spanjudge.config import parse_config
from spanjudge.engine import Engine
from spanjudge.offline import run_offline
from tests.conftest import scenario_files

LISBON = "What's the weather going to be like in Lisbon tomorrow? Should I bring a jacket?"
WEATHER_DESCRIPTION = "Use when the user asks about the weather, the forecast, or what to wear."
RELEASE_DESCRIPTION = (
    "Draft release notes for a version from its merged pull requests, grouped by label."
)
CALCULATE_STEP = "Compute the total per region and the grand total with `calculate`."
REQUIRED_STEP = (
    "Always compute the total per region and the grand total with `calculate`; "
    "never skip this step."
)


def _sessions(*scenarios: str) -> list[tuple[Path, dict[str, Any]]]:
    """Per fixture file, the first session of the first of ``scenarios`` it recorded."""
    out = []
    for path in scenario_files():
        records = json.loads(path.read_text())["sessions"]
        for file in dict.fromkeys(r["file"] for r in records):
            mine = [r for r in records if r["file"] == file]
            found = [r for s in scenarios for r in mine if r["scenario"] == s]
            if found:
                out.append((path.parent / file, found[0]))
    return out


def _judge(source: Path, edits: dict[str, str], tmp_path: Path, session_id: str) -> Any:
    text = source.read_text(encoding="utf-8")
    for old, new in edits.items():
        text = text.replace(old, new)
    edited = tmp_path / source.name
    edited.write_text(text, encoding="utf-8")
    keep = CollectingSink()
    run_offline([str(edited)], Engine(parse_config({})), keep)
    return keep.by_session()[session_id]


def _only(result: Any, evaluator: str) -> Any:
    found = [v for v in result.verdicts if v.evaluator == evaluator]
    assert len(found) == 1, found
    return found[0]


# A session that used no skill (a weather question where the fixtures have one), and one that
# loaded csv-report and skipped its `calculate` step.
WEATHER = _sessions("no_skill_needed", "write_then_delete")
SKIPPED = _sessions("skipped_steps")


def test_five_frameworks_or_more_are_covered() -> None:
    # A fixture set that recorded neither scenario (a framework-specific one) is left out.
    weather = {path.parent.name for path, _ in WEATHER}
    skipped = {path.parent.name for path, _ in SKIPPED}
    assert len(weather & skipped) >= 5, (weather, skipped)


@pytest.mark.parametrize(
    ("source", "record"), WEATHER, ids=[f"{p.stem}:{r['session_id'][:24]}" for p, r in WEATHER]
)
def test_weather_request_fits_a_what_to_wear_skill(
    source: Path, record: dict[str, Any], tmp_path: Path
) -> None:
    edits = {record["request"]: LISBON, RELEASE_DESCRIPTION: WEATHER_DESCRIPTION}
    result = _judge(source, edits, tmp_path, record["session_id"])
    verdict = _only(result, "skill_omission")
    offered = {e.name: e.description for e in result.trajectory.catalogue}
    if not offered:
        # Nothing to choose from recorded (Claude Code's default telemetry has no catalogue).
        assert (verdict.outcome, verdict.reason) == ("not_evaluated", "no_catalogue")
        return
    assert WEATHER_DESCRIPTION in (offered.get("release-notes") or "")
    # the request as the model was given it: alone, or inside the framework's task prompt
    assert LISBON in (result.trajectory.request or "")
    assert verdict.outcome == "fail", verdict.explanation
    assert verdict.target.skill == "release-notes"
    assert "weather" in verdict.explanation
    if record["scenario"] == "no_skill_needed":
        # The unedited session (the same kind of question, no such skill on offer) stays a pass.
        plain = _judge(source, {}, tmp_path, record["session_id"])
        assert _only(plain, "skill_omission").outcome == "pass"


@pytest.mark.parametrize(
    ("source", "record"), SKIPPED, ids=[f"{p.stem}:{r['session_id'][:24]}" for p, r in SKIPPED]
)
def test_skipping_a_required_step_caps_at_partially(
    source: Path, record: dict[str, Any], tmp_path: Path
) -> None:
    plain = _only(_judge(source, {}, tmp_path, record["session_id"]), "instruction_following")
    if CALCULATE_STEP not in source.read_text(encoding="utf-8"):
        # No content recorded (Claude Code default): no body, honestly not evaluated.
        assert plain.outcome == "not_evaluated"
        return
    # The scenario skips `calculate`, which the body does not insist on: one step of four. Where
    # the trace holds no answer (Spring AI logs it as plain text), the answering step has no
    # evidence either: two of four.
    answered = "final_answer" not in record.get("unobservable", ())
    assert plain.label == ("mostly" if answered else "partially"), plain.explanation
    edited = _judge(source, {CALCULATE_STEP: REQUIRED_STEP}, tmp_path, record["session_id"])
    verdict = _only(edited, "instruction_following")
    assert (verdict.label, verdict.outcome) == ("partially", "fail"), verdict.explanation
    assert "required step 2 skipped" in verdict.explanation
    # Which step matched which span stays in the explanation.
    assert re.search(
        r"step 1 \(Read the CSV file[^;]*: matched tool_call '[\w.:/-]+' span \w+",
        verdict.explanation,
    )
    assert "step 2 (Always compute" in verdict.explanation
