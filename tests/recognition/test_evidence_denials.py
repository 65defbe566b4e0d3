"""A load's result that denies, errs or is empty is a failed load, whatever words it uses.

Seen on a framework the fixtures do not cover (LangGraph through
openinference-instrumentation-langchain): a custom `fetch_doc(path=".../SKILL.md")` answering
"I'm sorry, access to that document is not permitted" was reported as a successful load, so
`skill_loaded` passed a session that never saw the skill. Spans come from a real SDK tracer.
"""

from __future__ import annotations

import pytest

from spanjudge.evaluators.base import EvaluationContext
from spanjudge.evaluators.skill_loaded import SkillLoaded
from spanjudge.values import Expectation
from tests.recognition.agent_spans import SKILL_MD, Call, Say, agent_run, loads, trajectory_of

CATALOGUE = "### Available skills\n- csv-report: Summarise a CSV file. (file: skills/csv-report)"


def _loads(call: Call) -> list[tuple[str, str]]:
    actions = [Say(system=CATALOGUE), call, Say(text="The total is 3.")]
    return loads(trajectory_of(lambda t: agent_run(t, "Build the sales report.", actions)))


READ = ("read_file", {"path": "skills/csv-report/SKILL.md"})
LOADER = ("load_skill", {"name": "csv-report"})
UNNAMED_LOADER = ("activate", {"name": "csv-report"})
PLAYBOOK = ("use_playbook", {"name": "csv-report"})


@pytest.mark.parametrize(
    ("call", "result"),
    [
        (READ, "I'm sorry, access to that file is not permitted."),
        (READ, "403 Forbidden"),
        (READ, "Timed out after 30s"),
        (READ, ""),
        (LOADER, "Skill csv-report is disabled by policy."),
        (LOADER, "Access denied."),
        (UNNAMED_LOADER, "Sorry, I can't activate that."),
        (LOADER, 'Result: {"status":"error","error":"disabled"} -- see the logs'),
        (PLAYBOOK, 'Loading...\n{"status": "error", "message": "x"}'),
    ],
)
def test_a_denied_erring_or_empty_load_is_failed(
    call: tuple[str, dict[str, str]], result: str
) -> None:
    tool, args = call
    assert _loads(Call(tool, args, result)) == [("csv-report", "failed")]


@pytest.mark.parametrize(
    ("call", "result"),
    [
        (READ, SKILL_MD),
        (LOADER, {"status": "loaded", "skill": "csv-report"}),
        # a body without front matter whose title holds a denial word is still a body
        (LOADER, "# Unauthorised access triage\n\nIt is not allowed to skip step 1."),
        (LOADER, "Use this skill for CSV reports.\n\nNever report a sorry total."),
    ],
)
def test_a_body_or_a_lazy_ok_stays_loaded(call: tuple[str, dict[str, str]], result: object) -> None:
    tool, args = call
    assert _loads(Call(tool, args, result)) == [("csv-report", "loaded")]


@pytest.mark.parametrize("result", ["__REDACTED__", "<redacted>", "[REDACTED]"])
@pytest.mark.parametrize("call", [READ, LOADER])
def test_a_redacted_result_is_unresolved_never_loaded(
    call: tuple[str, dict[str, str]], result: str
) -> None:
    tool, args = call
    assert _loads(Call(tool, args, result)) == [("csv-report", "unresolved")]


def test_a_required_skill_whose_every_load_result_was_hidden_is_not_evaluated() -> None:
    """Loaded or refused, a hidden result cannot tell: skill_loaded says so instead of guessing
    (OpenInference's hide_outputs; before, such a load passed even when it had been refused)."""
    actions = [Call(*READ, "__REDACTED__"), Say(text="__REDACTED__")]
    trajectory = trajectory_of(lambda t: agent_run(t, "Build the sales report.", actions))
    ctx = EvaluationContext(trajectory=trajectory, expectation=Expectation(skills=("csv-report",)))
    verdicts = SkillLoaded().evaluate(ctx)
    assert [(v.outcome, v.reason) for v in verdicts] == [("not_evaluated", "load_unresolved")]
    assert "hidden" in verdicts[0].explanation


@pytest.mark.parametrize(
    ("call", "result"),
    [
        (("stat", {"path": "skills/csv-report/SKILL.md"}), {"size": 412, "mtime": 1700000000}),
        (("file_exists", {"path": "skills/csv-report/SKILL.md"}), True),
        (("file_size", {"path": "skills/csv-report/SKILL.md"}), 412),
    ],
)
def test_metadata_about_a_skill_md_path_is_no_load(
    call: tuple[str, dict[str, str]], result: object
) -> None:
    # Seen on LangGraph: `file_exists(path=.../SKILL.md)` answering `true`
    # was a loaded skill, so skill_loaded passed a session that never read the skill.
    tool, args = call
    assert _loads(Call(tool, args, result)) == []


def test_a_required_skill_only_checked_for_existence_fails_skill_loaded() -> None:
    actions = [
        Say(system=CATALOGUE),
        Call("file_exists", {"path": "skills/csv-report/SKILL.md"}, True),
        Say(text="The total is 3."),
    ]
    trajectory = trajectory_of(lambda t: agent_run(t, "Build the sales report.", actions))
    ctx = EvaluationContext(trajectory=trajectory, expectation=Expectation(skills=("csv-report",)))
    (verdict,) = SkillLoaded().evaluate(ctx)
    assert verdict.outcome == "fail"
