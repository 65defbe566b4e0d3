"""`trajectory_match`: the reference from expectations, its three modes on hand-built sessions,
and the configuration mistakes it reports at once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from spanjudge.cli import main
from spanjudge.config import parse_config
from spanjudge.errors import ConfigError
from spanjudge.evaluators import trajectory_match
from spanjudge.evaluators.base import EvaluationContext
from spanjudge.evaluators.trajectory_match import TrajectoryMatch
from spanjudge.expectations import ExpectationResolver, parse_entries
from spanjudge.trajectory.assemble import SessionMeta, assemble
from spanjudge.trajectory.model import Trajectory
from spanjudge.trajectory.steps import Step
from spanjudge.values import Verdict
from tests.conftest import FIXTURES, load_schema
from tests.support.steps import spans_for, tool, turn


def _session(steps: list[Step], *, complete: bool = True) -> Trajectory:
    meta = SessionMeta(
        session_id="s-1",
        key_source="session.id",
        complete=complete,
        close_reason="end_of_input" if complete else "shutdown",
    )
    return assemble(meta, spans_for(steps), steps)


def _judge(steps: list[Step], reference: dict[str, Any], *, complete: bool = True) -> Verdict:
    entries = parse_entries({"sessions": {"s-1": {"trajectory": reference}}}, "test")
    trajectory = _session(steps, complete=complete)
    expectation = ExpectationResolver(entries).resolve(trajectory)
    [verdict] = TrajectoryMatch().evaluate(
        EvaluationContext(trajectory=trajectory, expectation=expectation)
    )
    return verdict


def _load(n: int, skill: str, tool_name: str = "load_skill", **extra: Any) -> Step:
    return Step(
        kind="skill_load",
        name=tool_name,
        span_id=format(n, "016x"),
        trace_id=format(1, "032x"),
        parent_span_id=format(1, "016x"),
        start_unix_nano=n * 10,
        end_unix_nano=n * 10 + 5,
        status="ok",
        skill=skill,
        skill_status="loaded",
        **extra,
    )


# read the data, compute, write the report
WORK = [
    turn(1, "summarise the sales"),
    _load(2, "csv-report"),
    tool(3, "read_csv", args={"path": "data/sales.csv"}),
    tool(4, "calculate", args={"expression": "1+2"}),
    tool(5, "write_file", args={"path": "out/report.md", "content": "..."}),
]


def test_without_a_reference_the_verdict_is_outside_coverage() -> None:
    trajectory = _session(WORK)
    expectation = ExpectationResolver().resolve(trajectory)
    [verdict] = TrajectoryMatch().evaluate(
        EvaluationContext(trajectory=trajectory, expectation=expectation)
    )
    assert verdict.outcome == "not_evaluated" and verdict.reason == "no_trajectory"


@pytest.mark.parametrize("match", ["exact", "in_order", "any_order"])
def test_a_namespaced_tool_is_the_tool_its_base_name_names(match: str) -> None:
    renamed = [
        tool(3, "mcp__files__read_csv", args={"path": "data/sales.csv"}),
        tool(4, "ops-calculate", args={"expression": "1+2"}),
        tool(5, "fs.write_file", args={"path": "out/report.md"}),
    ]
    reference = {"match": match, "tools": ["read_csv", "calculate", "write_file"]}
    assert _judge([WORK[0], *renamed], reference).outcome == "pass"


def test_extra_calls_fail_exact_only() -> None:
    reference = {"tools": ["read_csv", "write_file"]}
    exact = _judge(WORK, {**reference, "match": "exact"})
    assert exact.outcome == "fail" and exact.score == pytest.approx(2 / 3)
    assert exact.details is not None
    assert [e["tool"] for e in exact.details["extra"]] == ["calculate"]
    assert exact.explanation.endswith("extra calculate")
    for match in ("in_order", "any_order"):
        verdict = _judge(WORK, {**reference, "match": match})
        assert verdict.outcome == "pass" and verdict.score == 1.0
        assert verdict.details is not None
        assert [e["tool"] for e in verdict.details["extra"]] == ["calculate"]


def test_order_matters_except_in_any_order() -> None:
    reference = {"tools": ["write_file", "read_csv", "calculate"]}
    for match in ("exact", "in_order"):
        verdict = _judge(WORK, {**reference, "match": match})
        assert verdict.outcome == "fail"
        assert verdict.details is not None
        assert [o["tool"] for o in verdict.details["out_of_order"]] == ["write_file"]
        assert verdict.details["out_of_order"][0]["expected_position"] == 0
        assert verdict.details["missing"] == []
    assert _judge(WORK, {**reference, "match": "any_order"}).outcome == "pass"


def test_arguments_are_a_subset_and_a_differing_call_is_shown() -> None:
    ok = {"tools": ["read_csv", "calculate", "write_file"],
          "arguments": {"write_file": {"path": "out/report.md"}}}  # fmt: skip
    assert _judge(WORK, ok).outcome == "pass"  # `content` need not be listed
    wrong = {**ok, "arguments": {"write_file": {"path": "out/other.md"}}}
    verdict = _judge(WORK, wrong)
    assert verdict.outcome == "fail"
    assert verdict.details is not None
    [missing] = verdict.details["missing"]
    assert missing["expected"] == "write_file(path='out/other.md')"
    assert missing["arguments_differ"]["path"] == {
        "expected": "out/other.md",
        "recorded": "out/report.md",
    }
    assert [e["tool"] for e in verdict.details["extra"]] == ["write_file"]


@pytest.mark.parametrize(
    ("recorded", "expected", "holds"),
    [
        (1, True, False),  # true is no number in JSON
        (0, False, False),
        (True, 1, False),
        (True, True, True),
        (1, 1.0, True),  # one number
        ([1, 2], [True, 2], False),
        ({"a": 1}, {"a": True}, False),
    ],
)
def test_arguments_compare_as_json_values(recorded: Any, expected: Any, holds: bool) -> None:
    steps = [turn(1, "write it"), tool(2, "write_file", args={"path": "x", "force": recorded})]
    reference = {"tools": ["write_file"], "arguments": {"write_file": {"force": expected}}}
    assert _judge(steps, reference).outcome == ("pass" if holds else "fail")


def test_one_further_call_is_one_call() -> None:
    verdict = _judge(WORK[:4], {"tools": ["read_csv"], "match": "in_order"})
    assert verdict.explanation.endswith("; 1 further call allowed by in_order")


def test_arguments_the_trace_did_not_record_cannot_be_checked() -> None:
    steps = [WORK[0], tool(3, "read_csv"), tool(4, "write_file")]  # no arguments recorded
    reference = {"tools": ["read_csv", "write_file"],
                 "arguments": {"read_csv": {"path": "data/sales.csv"}}}  # fmt: skip
    verdict = _judge(steps, reference)
    assert verdict.outcome == "not_evaluated" and verdict.reason == "arguments_not_recorded"
    assert _judge(steps, {"tools": ["read_csv", "write_file"]}).outcome == "pass"


def test_skill_loads_count_where_listed_by_skill_or_by_loader() -> None:
    tools = ["read_csv", "calculate", "write_file"]
    assert _judge(WORK, {"tools": tools}).outcome == "pass"  # the load is not listed
    assert _judge(WORK, {"tools": [{"skill": "CSV-Report"}, *tools]}).outcome == "pass"
    assert _judge(WORK, {"tools": ["load_skill", *tools]}).outcome == "pass"
    verdict = _judge(WORK, {"tools": [*tools, {"skill": "csv-report"}]})
    assert verdict.outcome == "fail"
    assert verdict.details is not None
    assert [o["expected"] for o in verdict.details["out_of_order"]] == ["skill csv-report"]
    # a second load of a listed skill is extra
    again = [*WORK, _load(6, "csv-report")]
    verdict = _judge(again, {"tools": [{"skill": "csv-report"}, *tools]})
    assert verdict.outcome == "fail"
    assert verdict.details is not None
    assert [e.get("skill") for e in verdict.details["extra"]] == ["csv-report"]


def test_a_lazy_load_is_one_load_and_its_read_a_call_of_its_tool() -> None:
    # load_skill names the skill, then cat of its SKILL.md completes that one load
    read = _load(3, "csv-report", "exec_command", activation_of=format(2, "016x"))
    steps = [WORK[0], _load(2, "csv-report"), read, *WORK[2:]]
    tools = ["read_csv", "calculate", "write_file"]
    assert _judge(steps, {"tools": [{"skill": "csv-report"}, *tools]}).outcome == "pass"
    both = {"tools": [{"skill": "csv-report"}, "exec_command", *tools]}
    assert _judge(steps, both).outcome == "pass"


def test_a_session_cut_short_is_not_failed_for_calls_still_to_come() -> None:
    reference = {"tools": ["read_csv", "calculate", "write_file"], "match": "in_order"}
    verdict = _judge(WORK[:3], reference, complete=False)
    assert verdict.outcome == "not_evaluated" and verdict.reason == "session_incomplete"
    # but a call out of order is wrong whatever comes later
    reversed_ = {"tools": ["calculate", "read_csv"], "match": "in_order"}
    assert _judge(WORK[:4], reversed_, complete=False).outcome == "fail"


def test_exact_with_no_calls_listed_requires_none() -> None:
    assert _judge([WORK[0]], {"tools": []}).outcome == "pass"
    verdict = _judge(WORK, {"tools": []})
    assert verdict.outcome == "fail" and verdict.score == 0.0


def test_every_trajectory_mistake_is_reported_at_once() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(
            {
                "expectations": [
                    {
                        "when": {"request_matches": "report"},
                        "trajectory": {
                            "match": "unordered",
                            "tools": [
                                {"tool": "a", "skill": "b"},
                                5,
                                {"skill": "c", "arguments": {}},
                            ],
                            "arguments": {"zzz": {"x": 1}},
                            "order": [],
                        },
                    },
                    {
                        "when": {"request_matches": "x"},
                        "trajectory": {"match": "any_order", "tools": []},
                    },
                    {"when": {"request_matches": "y"}, "trajectory": {"match": "exact"}},
                ]
            }
        )  # fmt: skip
    problems = info.value.problems
    where = "expectations[0].trajectory"
    assert f"{where}.order: unknown key (allowed: tools, match, arguments)" in problems
    assert f"{where}.match: expected one of exact, in_order, any_order, got 'unordered'" in problems
    assert f"{where}.tools[0]: give exactly one of tool or skill" in problems
    assert any(p.startswith(f"{where}.tools[1]: expected a tool name") for p in problems)
    assert f"{where}.tools[2].arguments: a skill load is matched by its skill only" in problems
    assert f"{where}.arguments.zzz: zzz is not in tools" in problems
    assert (
        "expectations[1].trajectory.tools: an empty list always holds with match any_order"
        " (use match: exact to require no tool calls)"
    ) in problems
    assert (
        "expectations[2].trajectory.tools: required, a list of tool names or {skill: name}"
        in problems
    )


def test_a_reference_in_an_expectations_file_reaches_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expect = tmp_path / "expect.yaml"
    expect.write_text(
        yaml.safe_dump(
            {
                "sessions": {
                    "strands-default-reordered-skipped": {
                        "trajectory": {
                            "match": "in_order",
                            "tools": [{"skill": "csv-report"}, "read_csv", "write_file"],
                        }
                    }
                }
            }
        )
    )
    out = tmp_path / "report.json"
    trace = FIXTURES / "strands" / "strands_default.jsonl"
    code = main(["eval", str(trace), "--expect", str(expect), "--format", "json", "--output",
                 str(out)])  # fmt: skip
    capsys.readouterr()
    assert code == 1
    report = json.loads(out.read_text())
    jsonschema.validate(report, load_schema())
    by_session = {s["session_id"]: s for s in report["sessions"]}
    # the scenario's own record: the skill, then write_file before read_csv
    [verdict] = [
        v
        for v in by_session["strands-default-reordered-skipped"]["verdicts"]
        if v["evaluator"] == "trajectory_match"
    ]
    assert verdict["outcome"] == "fail"
    assert [o["tool"] for o in verdict["details"]["out_of_order"]] == ["write_file"]
    others = [
        v["reason"]
        for sid, s in by_session.items()
        if sid != "strands-default-reordered-skipped"
        for v in s["verdicts"]
        if v["evaluator"] == "trajectory_match"
    ]
    assert others and set(others) == {"no_trajectory"}
    summary = report["summary"]["by_evaluator"]["trajectory_match"]
    assert summary["coverage"] == 1.0
    assert summary["outside_coverage"] == {"no_trajectory": len(others)}


@pytest.mark.parametrize(
    ("tools", "match"),
    [
        (["read_csv", "calculate", "write_file"], "exact"),
        (["read_csv", "write_file"], "exact"),
        (["read_csv", "write_file"], "in_order"),
        (["write_file", "read_csv"], "in_order"),
        (["calculate", "missing_tool"], "in_order"),
        (["write_file", "read_csv", "calculate"], "any_order"),
        (["write_file", {"tool": "write_file", "arguments": {"path": "out/x.md"}}], "any_order"),
    ],
)
def test_a_session_too_long_to_align_exactly_gets_the_same_outcome(
    tools: list[Any], match: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    exactly = _judge(WORK, {"tools": tools, "match": match})
    monkeypatch.setattr(trajectory_match, "_MAX_CELLS", 1)
    greedily = _judge(WORK, {"tools": tools, "match": match})
    assert greedily.outcome == exactly.outcome
    assert greedily.details is not None and exactly.details is not None
    assert len(greedily.details["missing"]) + len(greedily.details["out_of_order"]) == len(
        exactly.details["missing"]
    ) + len(exactly.details["out_of_order"])


def test_a_reference_is_not_a_log() -> None:
    with pytest.raises(ConfigError) as info:
        parse_entries({"sessions": {"s": {"trajectory": {"tools": ["t"] * 501}}}}, "x.yaml")
    assert info.value.problems == ["sessions.s.trajectory.tools: at most 500 calls, got 501"]
