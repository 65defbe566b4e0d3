"""What a SKILL.md read loaded is what its documents say (seen on LangGraph).

- a result that prints two SKILL.md documents (`cat skills/*/SKILL.md`, one `cat` of two paths)
  loaded both skills, so a required second skill is not reported missing;
- a SKILL.md whose front matter names another skill than its folder loaded the skill its own
  `name:` says (the body says what was loaded).

Spans come from a real SDK tracer (GenAI semconv `invoke_agent` > `chat` / `execute_tool`).
"""

from __future__ import annotations

import json

import pytest
from opentelemetry.trace import Tracer

from spanjudge.evaluators.base import EvaluationContext
from spanjudge.evaluators.skill_loaded import SkillLoaded
from spanjudge.values import Expectation
from tests.recognition.agent_spans import SKILL_MD, Call, Say, agent_run, loads, trajectory_of

CATALOGUE = (
    "### Available skills\n- csv-report: Summarise a CSV file. (file: skills/csv-report)\n"
    "- release-notes: Write release notes. (file: skills/release-notes)"
)
RELEASE_MD = (
    "---\nname: release-notes\ndescription: Write release notes.\n---\n"
    "# Release notes\n\n---\n\n1. List the merged changes.\n2. Group them by area.\n"
)
# a skill that shows front matter as an example (skill-creator style) is still one document
TEMPLATE_MD = (
    "---\nname: skill-maker\ndescription: Write new skills.\n---\n# Skill maker\n\n"
    "Start every SKILL.md like this:\n\n```\n---\nname: my-skill\ndescription: What it does.\n"
    "---\n```\n"
)


def _run(call: Call) -> list[Say | Call]:
    return [Say(system=CATALOGUE), call, Say(text="Done.")]


def _verdicts(call: Call, required: tuple[str, ...]) -> list[tuple[str, str]]:
    trajectory = trajectory_of(lambda t: agent_run(t, "Report and notes, please.", _run(call)))
    ctx = EvaluationContext(trajectory=trajectory, expectation=Expectation(skills=required))
    return [(v.target.skill or "", v.outcome) for v in SkillLoaded().evaluate(ctx)]


@pytest.mark.parametrize(
    "args",
    [
        {"cmd": "cat skills/*/SKILL.md"},
        {"cmd": "cat skills/csv-report/SKILL.md skills/release-notes/SKILL.md"},
    ],
)
def test_every_skill_md_document_in_one_result_is_a_load(args: dict[str, str]) -> None:
    call = Call("exec_command", args, SKILL_MD + RELEASE_MD)
    trajectory = trajectory_of(lambda t: agent_run(t, "Report and notes, please.", _run(call)))
    assert loads(trajectory) == [("csv-report", "loaded"), ("release-notes", "loaded")]
    bodies = {x.skill: x.body for x in trajectory.skill_loads}
    assert bodies == {"csv-report": SKILL_MD, "release-notes": RELEASE_MD}
    assert trajectory.stats.skill_loads == 2
    assert _verdicts(call, ("release-notes",)) == [("release-notes", "pass")]
    assert _verdicts(call, ("csv-report", "release-notes")) == [
        ("csv-report", "pass"),
        ("release-notes", "pass"),
    ]


def test_a_rule_line_in_the_first_document_does_not_hide_the_second() -> None:
    # RELEASE_MD's body has a `---` rule: with SKILL_MD after it, the two `---` lines around
    # its last paragraph look like a block, but one without a skill's front matter
    args = {"cmd": "cat skills/release-notes/SKILL.md skills/csv-report/SKILL.md"}
    call = Call("exec_command", args, RELEASE_MD + SKILL_MD)
    trajectory = trajectory_of(lambda t: agent_run(t, "Report and notes, please.", _run(call)))
    assert loads(trajectory) == [("release-notes", "loaded"), ("csv-report", "loaded")]
    assert {x.skill: x.body for x in trajectory.skill_loads}["csv-report"] == SKILL_MD
    assert _verdicts(call, ("csv-report",)) == [("csv-report", "pass")]


def test_one_document_quoting_front_matter_is_one_load() -> None:
    call = Call("exec_command", {"cmd": "cat skills/skill-maker/SKILL.md"}, TEMPLATE_MD)
    trajectory = trajectory_of(lambda t: agent_run(t, "Make a skill.", _run(call)))
    assert loads(trajectory) == [("skill-maker", "loaded")]
    assert trajectory.stats.skill_loads == 1


def test_the_same_document_printed_twice_is_one_load() -> None:
    call = Call("exec_command", {"cmd": "cat a/SKILL.md a/SKILL.md"}, SKILL_MD + SKILL_MD)
    trajectory = trajectory_of(lambda t: agent_run(t, "Report.", _run(call)))
    assert loads(trajectory) == [("csv-report", "loaded")]


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("read_file", {"path": "skills/csv-report/SKILL.md"}),
        ("exec_command", {"cmd": "cat skills/csv-report/SKILL.md"}),
    ],
)
def test_the_front_matter_name_wins_over_the_folder_name(tool: str, args: dict[str, str]) -> None:
    call = Call(tool, args, RELEASE_MD)
    trajectory = trajectory_of(lambda t: agent_run(t, "Report and notes, please.", _run(call)))
    assert loads(trajectory) == [("release-notes", "loaded")]
    assert _verdicts(call, ("release-notes",)) == [("release-notes", "pass")]
    assert _verdicts(call, ("csv-report",)) == [("csv-report", "fail")]


def test_a_failed_read_keeps_the_folder_name() -> None:
    call = Call(
        "exec_command",
        {"cmd": "cat skills/csv-report/SKILL.md"},
        "cat: skills/csv-report/SKILL.md: No such file or directory",
    )
    trajectory = trajectory_of(lambda t: agent_run(t, "Report.", _run(call)))
    assert loads(trajectory) == [("csv-report", "failed")]


def test_head_of_several_files_with_its_headers_loads_each() -> None:
    output = (
        "==> skills/csv-report/SKILL.md <==\n" + SKILL_MD + "\n"
        "==> skills/release-notes/SKILL.md <==\n" + RELEASE_MD
    )
    call = Call("exec_command", {"cmd": "head -n 20 skills/*/SKILL.md"}, output)
    trajectory = trajectory_of(lambda t: agent_run(t, "Report and notes, please.", _run(call)))
    assert loads(trajectory) == [("csv-report", "loaded"), ("release-notes", "loaded")]
    assert {x.skill: x.body for x in trajectory.skill_loads}["release-notes"] == RELEASE_MD


def _pinned_two(tracer: Tracer) -> None:
    """A harness that pins two skills in one user message (no tool call asked for them)."""
    agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a"}
    texts = ["Report and notes, please.", SKILL_MD + RELEASE_MD]
    chat = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "m",
        "gen_ai.input.messages": json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": t}]} for t in texts]
        ),
        "gen_ai.output.messages": json.dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": "Done."}]}]
        ),
    }
    with (
        tracer.start_as_current_span("invoke_agent a", attributes=agent),
        tracer.start_as_current_span("chat m", attributes=chat),
    ):
        pass


def test_two_skills_pinned_in_one_message_are_two_loads() -> None:
    trajectory = trajectory_of(_pinned_two)
    assert loads(trajectory) == [("csv-report", "loaded"), ("release-notes", "loaded")]
    assert {x.skill: x.body for x in trajectory.skill_loads} == {
        "csv-report": SKILL_MD,
        "release-notes": RELEASE_MD,
    }


MISSING = "cat: skills/missing/SKILL.md: No such file or directory\n"


@pytest.mark.parametrize(
    ("result", "error"),
    [
        (SKILL_MD + MISSING, "exit status 1"),  # the span has error status
        (SKILL_MD + MISSING + "Exit code 1", None),
    ],
)
def test_a_shell_read_failing_on_another_file_still_printed_the_skill(
    result: str, error: str | None
) -> None:
    args = {"cmd": "cat skills/csv-report/SKILL.md skills/missing/SKILL.md"}
    call = Call("exec_command", args, result, error=error)
    trajectory = trajectory_of(lambda t: agent_run(t, "Report.", _run(call)))
    assert loads(trajectory) == [("csv-report", "loaded")]
    assert _verdicts(call, ("csv-report",)) == [("csv-report", "pass")]


def test_an_erring_load_whose_error_is_no_shell_failure_stays_failed() -> None:
    call = Call("load_skill", {"name": "csv-report"}, SKILL_MD, error="PolicyError: blocked")
    trajectory = trajectory_of(lambda t: agent_run(t, "Report.", _run(call)))
    assert loads(trajectory) == [("csv-report", "failed")]
