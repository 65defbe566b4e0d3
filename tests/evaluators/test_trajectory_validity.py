"""`trajectory_validity`: violations listed with their spans; bad constraints stop start-up."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from spanjudge.config import parse_config
from spanjudge.errors import ConfigError
from spanjudge.evaluators.base import EvaluationContext
from spanjudge.evaluators.trajectory_validity import TrajectoryValidity
from spanjudge.evaluators.validity_rules import glob_to_regex, validate_schema
from spanjudge.trajectory.assemble import SessionMeta, assemble
from spanjudge.trajectory.steps import Step
from spanjudge.values import Expectation
from tests.support.memory import bytes_kept
from tests.support.reports import STRANDS, TRAJECTORY, evaluate_fixture, verdict_of
from tests.support.steps import spans_for, tool, turn


def check(steps: list[Step], options: dict[str, Any], complete: bool = True, **extra: Any) -> Any:
    meta = SessionMeta(
        session_id="s",
        key_source="session.id",
        complete=complete,
        close_reason="end_of_input" if complete else "shutdown",
    )
    t = assemble(meta, spans_for(steps), steps)
    if extra:
        t = dataclasses.replace(t, **extra)
    problems: list[str] = []
    evaluator = TrajectoryValidity.from_options(options, "evaluators.trajectory_validity", problems)
    assert problems == []
    [v] = evaluator.evaluate(EvaluationContext(trajectory=t, expectation=Expectation()))
    return v


def sid(n: int) -> str:
    return format(n, "016x")


def test_globs_respect_path_segments():
    assert glob_to_regex("out/**").match("out/a/b.md")
    assert not glob_to_regex("out/**").match("tmp/out/a")
    assert glob_to_regex("out/*.md").match("out/r.md")
    assert not glob_to_regex("out/*.md").match("out/x/r.md")
    assert glob_to_regex("**/SKILL.md").match("SKILL.md")


def test_every_violation_is_listed_with_its_span_id():
    steps = [
        turn(1, "go"),
        tool(
            2, "write_file", args={"path": "tmp/r.md", "content": "x"}
        ),  # before read_csv; bad path
        tool(3, "read_csv", args={"path": "data/s.csv"}),
        tool(4, "shell", args={"cmd": "rm -rf /"}),  # forbidden
        tool(5, "write_file", args={"path": "./out/r.md", "content": "<b>"}),  # bad content
    ]
    v = check(
        steps,
        {
            "forbidden_tools": ["shell*"],
            "arguments": {"write_file": {"path": "out/**", "content": {"not_regex": "<"}}},
            "order": [{"before": "read_csv", "after": "write_file"}],
            "max_tool_calls": 3,
        },
    )
    assert v.outcome == "fail" and v.score == 0.0
    got = sorted((x["kind"], x["span_id"]) for x in v.details["violations"])
    assert got == sorted(
        [
            ("argument", sid(2)),
            ("order", sid(2)),
            ("forbidden_tool", sid(4)),
            ("argument", sid(5)),
            ("step_limit", sid(5)),
        ]
    )
    assert set(v.evidence) == {sid(2), sid(4), sid(5)}
    assert "5 violation(s)" in v.explanation and sid(4) in v.explanation
    assert "write_file.path='tmp/r.md' must match glob 'out/**'" in v.explanation


def test_allowed_tools_list_includes_skill_loads_by_tool_name():
    load = Step(
        kind="skill_load",
        name="skills",
        span_id=sid(2),
        trace_id=format(1, "032x"),
        parent_span_id=sid(1),
        start_unix_nano=20,
        skill="csv-report",
        skill_status="loaded",
    )
    v = check([turn(1, "go"), load, tool(3, "read_csv")], {"allowed_tools": ["read_*"]})
    assert v.outcome == "fail" and [x["span_id"] for x in v.details["violations"]] == [sid(2)]
    v = check([turn(1, "go"), load, tool(3, "read_csv")], {"allowed_tools": ["read_*", "skills"]})
    assert v.outcome == "pass"


def test_recorded_tool_schema_is_used_by_default_and_can_be_switched_off():
    schemas = {
        "write_file": {
            "type": "object",
            "required": ["path"],
            "properties": {"path": {"type": "string"}},
        }
    }
    steps = [turn(1, "go"), tool(2, "write_file", args={"path": 3}), tool(3, "write_file", args={})]
    v = check(steps, {}, tool_schemas=schemas)
    assert v.outcome == "fail" and {x["kind"] for x in v.details["violations"]} == {"schema"}
    assert [x["span_id"] for x in v.details["violations"]] == [sid(2), sid(3)]
    v = check(steps, {"trace_schemas": False}, tool_schemas=schemas)
    assert v.outcome == "not_evaluated" and v.reason == "no_constraints" and v.score is None


def test_arguments_nested_deeper_than_json_reads_are_unchecked_not_an_evaluator_error():
    schemas = {"lookup": {"type": "object", "properties": {"q": {"type": "string"}}}}
    deep = '{"q": ' + "[" * 5_000 + "]" * 5_000 + "}"  # kept as text: no parser reads it
    steps = [turn(1, "go"), tool(2, "lookup", args=deep), tool(3, "lookup", args={"q": 1})]
    v = check(steps, {}, tool_schemas=schemas)
    assert v.reason != "evaluator_error"
    assert v.outcome == "fail" and [x["span_id"] for x in v.details["violations"]] == [sid(3)]


@pytest.mark.parametrize("ref", ["#/$defs/missing", "#"])
def test_a_recorded_schema_whose_ref_leads_nowhere_checks_nothing(ref: str) -> None:
    # a valid schema that cannot validate anything: a $ref to nothing, or only to itself
    schemas = {"lookup": {"$ref": ref}, "write_file": {"type": "object", "required": ["path"]}}
    steps = [turn(1, "go"), tool(2, "lookup", args={"q": 1}), tool(3, "write_file", args={})]
    v = check(steps, {}, tool_schemas=schemas)
    assert v.reason != "evaluator_error"
    assert v.outcome == "fail" and [x["span_id"] for x in v.details["violations"]] == [sid(3)]
    assert v.details["schema_checked_calls"] == 1
    assert any("schema of lookup cannot be used" in note for note in v.details["notes"])


def test_schema_violations_say_where_and_what_in_jsonschemas_words():
    schema = {
        "type": "object",
        "required": ["mode"],
        "additionalProperties": False,
        "properties": {"mode": {"enum": ["a", "b"]}, "n": {"type": "integer"}},
    }
    steps = [
        turn(1, "go"),
        tool(2, "run", args={"mode": "a", "n": 2.0}),  # 2.0 is an integer in JSON Schema
        tool(3, "run", args={"mode": "c", "n": True, "x": 1}),
        tool(4, "run", args="{}"),
    ]
    v = check(steps, {"schemas": {"run": schema}})
    assert v.outcome == "fail" and v.details["validator"] == "jsonschema"
    assert v.details["schema_checked_calls"] == 3
    assert [(x["span_id"], x["message"]) for x in v.details["violations"]] == [
        (sid(3), "arguments: Additional properties are not allowed ('x' was unexpected)"),
        (sid(3), "mode: 'c' is not one of ['a', 'b']"),
        (sid(3), "n: True is not of type 'integer'"),
        (sid(4), "arguments: 'mode' is a required property"),
    ]


def test_the_order_of_a_schemas_keywords_does_not_move_its_messages():
    keywords = [("type", "object"), ("required", ["path"]), ("additionalProperties", False)]
    messages = []
    for order in (keywords, keywords[::-1]):
        steps = [turn(1, "go"), tool(2, "write_file", args={"mode": "w"})]
        v = check(steps, {}, tool_schemas={"write_file": dict(order)})
        messages.append([x["message"] for x in v.details["violations"]])
    assert len(messages[0]) == 2 and messages[0] == messages[1]


def test_recorded_schemas_are_read_from_text_and_wrappers_and_invalid_ones_are_skipped():
    schema = {"type": "object", "required": ["path"]}
    steps = [turn(1, "go"), tool(2, "write_file", args={})]
    for recorded in (json.dumps(schema), {"json": schema}):
        v = check(steps, {}, tool_schemas={"write_file": recorded})
        assert v.outcome == "fail" and v.details["schema_checked_calls"] == 1
    for recorded in ({"type": "strnig"}, "not json", ["type", "object"]):
        v = check(steps, {}, tool_schemas={"write_file": recorded})
        assert v.outcome == "not_evaluated" and v.reason == "no_constraints"
        assert v.details["schema_checked_calls"] == 0


def test_no_constraints_and_no_schema_is_not_evaluated_with_counts():
    v = check([turn(1, "go"), tool(2, "read_csv")], {})
    assert v.outcome == "not_evaluated" and v.reason == "no_constraints"
    assert v.details["checked_calls"] == 1


def test_incomplete_session_without_violation_is_not_evaluated():
    v = check([turn(1, "go"), tool(2, "read_csv")], {"max_steps": 5}, complete=False)
    assert v.outcome == "not_evaluated" and v.reason == "session_incomplete"


def test_fixture_verdicts_match_the_scenario_record():
    rule = {"path": "out/**"}
    results = evaluate_fixture(
        STRANDS / "strands_trajectory.jsonl",
        {
            "evaluators": {
                "trajectory_validity": {"arguments": {"write_file": rule, "delete_file": rule}}
            }
        },
    )
    for record in TRAJECTORY:
        v = verdict_of(results[record["session_id"]], "trajectory_validity")
        bad = [
            c
            for c in record["calls"]
            if c["tool"] in ("write_file", "delete_file")
            and not c["args"]["path"].startswith("out/")
        ]
        assert v.outcome == ("fail" if bad else "pass"), (record["session_id"], v.explanation)
        assert len(v.details["violations"]) == len(bad)
        for call in bad:
            assert repr(call["args"]["path"]) in v.explanation


@pytest.mark.parametrize(
    "options, expected",
    [
        (
            {"arguments": {"write_file": {"path": {"regex": "out/("}}}},
            "trajectory_validity.arguments.write_file.path: invalid regular expression 'out/('",
        ),
        (
            {"max_step": 3},
            "evaluators.trajectory_validity.max_step: unknown option (did you mean 'max_steps'?)",
        ),
        (
            {"schemas": {"write_file": {"type": "strnig"}}},
            "evaluators.trajectory_validity.schemas.write_file: the JSON Schema does not parse: "
            "'strnig' is not valid under any of the given schemas (at type)",
        ),
        (
            {"schemas": {"write_file": "object"}},
            "evaluators.trajectory_validity.schemas.write_file: the JSON Schema does not parse",
        ),
        ({"order": [{"first": "a"}]}, "evaluators.trajectory_validity.order[0]: expected {before"),
    ],
)
def test_bad_constraints_stop_start_up_with_path_and_fix(options, expected):  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError) as err:
        parse_config({"evaluators": {"trajectory_validity": options}}, "spanjudge.yaml")
    assert "invalid configuration in spanjudge.yaml" in str(err.value)
    assert expected in str(err.value)


def test_validating_many_long_arguments_keeps_no_memory() -> None:
    # a serve process validates calls for as long as it runs: what it remembers of the
    # arguments it saw must not grow with their size
    schema = {"type": "object", "properties": {"content": {"type": "string"}}}

    def validate_many() -> None:
        for i in range(1_500):
            assert validate_schema({"content": f"{i:05d}" + "x" * 40_000}, schema) == []

    assert bytes_kept(validate_many) < 5_000_000
