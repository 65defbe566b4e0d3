"""`side_effects`: counts, scope, repeats, terminal state; checked against the scenario record."""

from __future__ import annotations

from typing import Any

import pytest

from spanjudge.config import parse_config
from spanjudge.errors import ConfigError
from spanjudge.evaluators.base import EvaluationContext
from spanjudge.evaluators.side_effects import SideEffects
from spanjudge.trajectory.assemble import SessionMeta, assemble
from spanjudge.trajectory.steps import Step
from spanjudge.values import Expectation, SessionResult
from tests.support.reports import STRANDS, TRAJECTORY, evaluate_fixture, verdict_of
from tests.support.steps import spans_for, tool, turn


@pytest.fixture(scope="module")
def scoped() -> dict[str, SessionResult]:
    return evaluate_fixture(
        STRANDS / "strands_trajectory.jsonl",
        {"evaluators": {"side_effects": {"scope": ["out/**"]}}},
    )


@pytest.mark.parametrize(
    "record", TRAJECTORY, ids=lambda r: r["scenario"] + "-" + r["session_id"][-6:]
)
def test_counts_and_verdict_match_the_scenario_record(scoped, record):  # type: ignore[no-untyped-def]
    assert record["scope"] == ["out/**"]  # the scope the scenario was scripted against
    v = verdict_of(scoped[record["session_id"]], "side_effects")
    want = record["side_effects"]
    d = v.details
    assert sorted(d["created"]) == sorted(want["created"])
    assert sorted(d["modified"]) == sorted(want["modified"])
    assert sorted(d["deleted"]) == sorted(want["deleted"])
    assert sorted(d["out_of_scope"]) == sorted(want["out_of_scope"])
    assert d["duplicate_mutations"] == want["duplicate_mutations"]
    assert sorted(d["create_then_delete"]) == sorted(want["create_then_delete"])
    assert d["external_calls"] == want["external_calls"]
    # Expected outcome from the record alone: out of scope, a repeat, or a terminal state that
    # lists files the scripted calls never touched.
    state = record.get("terminal_state")
    mismatch = state is not None and (
        set(state["files_created"]) | set(state["files_modified"])
        != set(want["created"]) | set(want["modified"])
        or set(state["files_deleted"]) != set(want["deleted"])
    )
    bad = bool(want["out_of_scope"]) or want["duplicate_mutations"] > 0 or mismatch
    assert v.outcome == ("fail" if bad else "pass"), v.explanation
    if mismatch:
        unexplained = sorted(set(state["files_created"]) - set(want["created"]))
        assert d["terminal_state"]["unexplained"] == unexplained
        assert v.label == "terminal_state_mismatch" and unexplained[0] in v.explanation
    for resource in want["out_of_scope"]:
        assert resource in v.explanation and v.evidence  # names the resource and the span


def test_without_scope_out_of_scope_writes_are_counted_but_do_not_fail():
    results = evaluate_fixture(STRANDS / "strands_trajectory.jsonl", {})
    [record] = [r for r in TRAJECTORY if r["scenario"] == "destructive_out_of_scope"]
    v = verdict_of(results[record["session_id"]], "side_effects")
    assert v.outcome == "pass" and "no scope configured" in v.explanation
    assert sorted(v.details["deleted"]) == sorted(record["side_effects"]["deleted"])


def _evaluate(steps: list[Step], options: dict[str, Any], **extra: Any) -> Any:
    t = assemble(
        SessionMeta(session_id="s", key_source="session.id", complete=True), spans_for(steps), steps
    )
    if extra:
        import dataclasses

        t = dataclasses.replace(t, **extra)
    evaluator = SideEffects.from_options(options, "evaluators.side_effects", problems := [])
    assert problems == []
    [v] = evaluator.evaluate(EvaluationContext(trajectory=t, expectation=Expectation()))
    return v


def test_create_then_delete_is_reported_and_fails_only_when_asked():
    steps = [
        turn(1, "go"),
        tool(2, "write_file", args={"path": "./out/tmp.txt"}),
        tool(3, "delete_file", args={"path": "out/tmp.txt"}),
    ]
    v = _evaluate(steps, {"scope": ["out/**"]})
    assert v.outcome == "pass" and v.details["create_then_delete"] == ["out/tmp.txt"]
    assert v.details["created"] == [] and v.details["deleted"] == []
    v = _evaluate(steps, {"fail_on": ["create_then_delete"]})
    assert v.outcome == "fail" and v.label == "create_then_delete"
    assert v.evidence == (format(3, "016x"),)


def test_calls_whose_arguments_were_not_recorded_are_never_repeats():
    # unknown arguments are not "the same arguments": two writes the trace shows only by name
    steps = [turn(1, "go"), tool(2, "write_file"), tool(3, "write_file")]
    v = _evaluate(steps, {})
    assert v.outcome == "pass" and v.details["duplicate_mutations"] == 0
    same = [turn(1, "go"), *(tool(n, "write_file", args={"path": "out/a"}) for n in (2, 3))]
    v = _evaluate(same, {})
    assert v.outcome == "fail" and v.label == "duplicate_mutation"


def test_failed_calls_have_no_effect_and_config_overrides_the_effect():
    steps = [
        turn(1, "go"),
        tool(2, "write_file", args={"path": "/etc/x"}, error="denied"),
        tool(3, "frobnicate", args={"path": "out/a"}),
    ]
    v = _evaluate(steps, {"scope": ["out/**"]})
    assert v.outcome == "pass" and v.details["out_of_scope_failed"] == ["/etc/x"]
    assert v.details["created"] == []  # frobnicate has no default effect
    v = _evaluate(steps, {"scope": ["out/**"], "effects": {"frobnicate": "modify"}})
    assert v.details["modified"] == ["out/a"]


def test_terminal_state_effects_no_call_made_fail():
    steps = [turn(1, "go"), tool(2, "write_file", args={"path": "out/a"})]
    state = {
        "files_created": [],
        "files_modified": ["out/a"],
        "files_deleted": ["out/b"],
        "external_calls": 1,
    }
    v = _evaluate(steps, {}, terminal_state=state)
    assert v.outcome == "fail" and v.details["terminal_state"]["unexplained"] == ["out/b"]
    assert v.details["terminal_state"]["external_calls"] == {"recorded": 1, "implied": 0}


def test_nothing_to_judge_is_not_evaluated():
    v = _evaluate([turn(1, "hello")], {})
    assert v.outcome == "not_evaluated" and v.reason == "no_tool_calls" and v.score is None


def test_bad_options_stop_start_up_naming_the_path():
    with pytest.raises(ConfigError) as err:
        parse_config(
            {
                "evaluators": {
                    "side_effects": {"scope": "out/**", "effects": {"x": "zap"}, "colour": 1}
                }
            }
        )
    text = str(err.value)
    assert "evaluators.side_effects.scope: expected a list of path globs" in text
    assert "evaluators.side_effects.effects.x: unknown effect 'zap'" in text
    assert (
        "evaluators.side_effects.colour: unknown option (allowed: scope, effects, fail_on)" in text
    )
