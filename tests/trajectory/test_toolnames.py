"""Namespaced tool names (`ops-get_exchange_rate`, `plugin.function`, `mcp__server__tool`,
`server/tool`, `server:tool`) compare equal to the bare name everywhere names are compared, and
reports keep the recorded name."""

from __future__ import annotations

from typing import Any

import pytest

from spanjudge.evaluators.base import EvaluationContext
from spanjudge.evaluators.instruction_following import InstructionFollowing
from spanjudge.evaluators.trajectory_validity import TrajectoryValidity
from spanjudge.recognition.skill_tools import known_loader
from spanjudge.trajectory.assemble import SessionMeta, assemble
from spanjudge.trajectory.effects import EffectMap
from spanjudge.trajectory.toolnames import candidates, same_tool
from spanjudge.values import Expectation
from tests.judges.builders import CSV_FOLLOWED, CSV_REQUEST, Tool, trajectory
from tests.support.steps import spans_for, tool, turn

META = SessionMeta(session_id="s", key_source="session.id", complete=True)
NAMESPACED = ["ops-{}", "plugin.{}", "mcp__server__{}", "server/{}", "server:{}"]


@pytest.mark.parametrize("form", NAMESPACED)
def test_a_namespaced_name_is_the_bare_tool(form: str) -> None:
    recorded = form.format("get_exchange_rate")
    assert same_tool(recorded, "get_exchange_rate")
    assert same_tool(recorded, recorded)
    assert not same_tool(recorded, "exchange_rate")  # `_` joins words; it separates nothing
    assert not same_tool("get_exchange_rate", recorded)


def test_the_exact_name_comes_first_then_longer_bases() -> None:
    assert candidates("a.b-c") == ("a.b-c", "b-c", "c")
    assert candidates("read_csv") == ("read_csv",)


@pytest.mark.parametrize("form", NAMESPACED)
def test_skill_steps_are_evidenced_by_namespaced_calls(form: str) -> None:
    events = tuple(
        Tool(form.format(e.name), e.arguments, e.result) if isinstance(e, Tool) else e
        for e in CSV_FOLLOWED
    )
    [verdict] = InstructionFollowing().evaluate(
        EvaluationContext(trajectory=trajectory(CSV_REQUEST, *events), expectation=Expectation())
    )
    assert (verdict.label, verdict.outcome) == ("fully", "pass"), verdict.explanation


@pytest.mark.parametrize("form", NAMESPACED)
def test_create_then_delete_through_a_namespace_is_a_backtrack(form: str) -> None:
    steps = [
        turn(1, "go"),
        tool(2, form.format("create_file"), args={"path": "out/tmp.txt"}),
        tool(3, form.format("delete_file"), args={"path": "out/tmp.txt"}),
    ]
    t = assemble(META, spans_for(steps), steps)
    assert t.stats.backtracks == 1
    assert [s.name for s in t.tool_calls()] == [
        form.format("create_file"),
        form.format("delete_file"),
    ]


def test_an_effect_override_for_the_bare_name_covers_the_namespaced_one() -> None:
    effects = EffectMap(overrides={"archive": "delete"})
    assert effects.effect("ops-archive") == "delete"
    assert effects.effect("ops-delete_file") == "delete"


def _validity(steps: list[Any], options: dict[str, Any]) -> Any:
    t = assemble(META, spans_for(steps), steps)
    problems: list[str] = []
    evaluator = TrajectoryValidity.from_options(options, "evaluators.trajectory_validity", problems)
    assert problems == []
    [verdict] = evaluator.evaluate(EvaluationContext(trajectory=t, expectation=Expectation()))
    return verdict


def test_config_rules_name_the_bare_tool() -> None:
    steps = [
        turn(1, "go"),
        tool(2, "plugin.write_file", args={"path": "out/r.md"}),
        tool(3, "plugin.read_csv", args={"path": "data/s.csv"}),
        tool(4, "mcp__shell__run", args={"cmd": "ls"}),
    ]
    verdict = _validity(
        steps,
        {
            "allowed_tools": ["read_*", "write_file"],
            "forbidden_tools": ["run"],
            "order": [{"before": "read_csv", "after": "write_file"}],
        },
    )
    kinds = sorted((v["kind"], v["tool"]) for v in verdict.details["violations"])
    assert kinds == [
        ("forbidden_tool", "mcp__shell__run"),
        ("order", "plugin.write_file"),
        ("tool_not_allowed", "mcp__shell__run"),
    ]


def test_a_namespaced_known_loader_is_a_loader() -> None:
    assert known_loader("plugin.load_skill") == known_loader("load_skill") is not None
    assert known_loader("ops-skills") == known_loader("skills") is not None
    assert known_loader("ops-read_file") is None
