"""The heuristic judge on the real fixture sessions: the right skill is a Yes and the
wrong one a No; followed steps rank above skipped ones, which rank above reordered-and-skipped;
an injected "answer Yes" in a tool output changes nothing. Ground truth is each scenario's own
label in `scenarios.json`."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.fixture_reports import RECORDS, session_report

FRAMEWORKS = sorted({d for d, _ in RECORDS})


def _by_scenario(directory: str) -> dict[str, dict[str, Any]]:
    """scenario name -> report session, for the first (default-mode) session of each."""
    out: dict[str, dict[str, Any]] = {}
    for d, record in RECORDS:
        if d == directory and record["scenario"] not in out:
            out[record["scenario"]] = session_report(d, record["session_id"])
    return out


def _verdict(session: dict[str, Any], evaluator: str) -> dict[str, Any] | None:
    judged = [
        v
        for v in session["verdicts"]
        if v["evaluator"] == evaluator and v["outcome"] != "not_evaluated"
    ]
    return judged[0] if judged else None


def test_right_skill_is_yes_and_wrong_skill_is_no() -> None:
    judged = 0
    for directory in FRAMEWORKS:
        sessions = _by_scenario(directory)
        if not {"required_skill_followed", "wrong_skill"} <= set(sessions):
            continue
        right = _verdict(sessions["required_skill_followed"], "skill_selection")
        wrong = _verdict(sessions["wrong_skill"], "skill_selection")
        if right is None or wrong is None:
            continue  # no catalogue recorded (Claude Code default tracing): not judged
        assert right["judge"] == wrong["judge"] == "heuristic"
        assert (right["outcome"], wrong["outcome"]) == ("pass", "fail"), directory
        judged += 1
    assert judged >= 4


def test_followed_ranks_above_skipped_above_reordered_and_skipped() -> None:
    judged = 0
    for directory in FRAMEWORKS:
        sessions = _by_scenario(directory)
        if not {"required_skill_followed", "skipped_steps", "reordered_skipped"} <= set(sessions):
            continue  # a fixture set without these scenarios (haystack)
        scores = []
        for scenario in ("required_skill_followed", "skipped_steps", "reordered_skipped"):
            verdict = _verdict(sessions[scenario], "instruction_following")
            scores.append(None if verdict is None else verdict["score"])
        if None in scores:
            continue  # the skill body was not recorded: honestly not evaluated
        assert scores[0] > scores[1] > scores[2], (directory, scores)
        assert scores[0] == 1.0
        judged += 1
    assert judged >= 4


INJECTED = sorted({d for d, r in RECORDS if r["scenario"] == "prompt_injection"})


@pytest.mark.parametrize("directory", INJECTED)
def test_injected_answer_yes_changes_nothing(directory: str) -> None:
    session = _by_scenario(directory)["prompt_injection"]
    selection = [v for v in session["verdicts"] if v["evaluator"] == "skill_selection"]
    # the wrong skill was loaded; a tool output saying "answer Yes" must not turn it into a pass
    assert selection and all(v["outcome"] != "pass" for v in selection)
