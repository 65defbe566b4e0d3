"""`tool_selection` and `tool_parameters`: one verdict per tool call, on the call's span and id."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from spanjudge import CollectingSink
from spanjudge.config import parse_config
from spanjudge.engine import Engine
from spanjudge.evaluators.base import EvaluationContext, build_evaluators
from spanjudge.evaluators.tool_parameters import ToolParameters
from spanjudge.evaluators.tool_selection import ToolSelection
from spanjudge.judges.openai import OpenAIJudge
from spanjudge.judges.reliability import CallPolicy
from spanjudge.offline import run_offline
from spanjudge.values import Expectation
from tests.conftest import FIXTURES
from tests.judges.builders import CSV_FOLLOWED, CSV_REQUEST, Answer, Load, Tool, trajectory
from tests.judges.chat_server import chat_server, completion


def _ctx(traj: Any, judge: Any = None) -> EvaluationContext:
    return EvaluationContext(trajectory=traj, expectation=Expectation(), judge=judge)


def test_tool_level_evaluators_are_opt_in() -> None:
    names = [e.name for e in build_evaluators({}, [])]
    assert "tool_selection" not in names and "tool_parameters" not in names
    chosen = [e.name for e in build_evaluators({"tool_parameters": {}}, [])]
    assert chosen[-1] == "tool_parameters" and "tool_selection" not in chosen


def test_one_verdict_per_tool_call_targeted_at_its_span() -> None:
    traj = trajectory(CSV_REQUEST, *CSV_FOLLOWED)
    verdicts = ToolSelection().evaluate(_ctx(traj))
    calls = [s for s in traj.steps if s.kind == "tool_call"]
    assert [v.target.span_id for v in verdicts] == [c.span_id for c in calls]
    assert [v.details["tool"] for v in verdicts if v.details] == [
        "read_csv",
        "calculate",
        "write_file",
    ]
    assert all(v.outcome == "pass" and v.label == "right_tool" for v in verdicts)
    assert "is a step of loaded skill 'csv-report'" in verdicts[1].explanation


def test_nothing_to_judge_is_not_evaluated_with_a_reason() -> None:
    no_tools = trajectory(CSV_REQUEST, Answer("42"))
    (selection,) = ToolSelection().evaluate(_ctx(no_tools))
    assert (selection.outcome, selection.reason) == ("not_evaluated", "no_tool_calls")
    unrecorded = trajectory(CSV_REQUEST, Tool("read_csv", None))
    (params,) = ToolParameters().evaluate(_ctx(unrecorded))
    assert (params.outcome, params.reason) == ("not_evaluated", "arguments_not_recorded")
    assert params.target.span_id == "span-1"


def test_parameters_checked_against_the_recorded_schema() -> None:
    traj = trajectory(CSV_REQUEST, Load("csv-report"), Tool("read_csv", {"file": "sales.csv"}))
    schema = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
    traj = replace(traj, tool_schemas={"read_csv": schema})
    (verdict,) = ToolParameters().evaluate(_ctx(traj))
    assert (verdict.outcome, verdict.label) == ("fail", "wrong_arguments")
    assert "missing required argument path" in verdict.explanation


def test_a_tool_not_offered_is_the_wrong_tool() -> None:
    traj = trajectory(CSV_REQUEST, Tool("rm_rf", {"path": "sales.csv"}))
    traj = replace(traj, tool_schemas={"read_csv": {}, "write_file": {}})
    (verdict,) = ToolSelection().evaluate(_ctx(traj))
    assert verdict.outcome == "fail"
    assert "not among the tools offered (read_csv, write_file)" in verdict.explanation


def test_on_fixture_sessions_the_out_of_scope_delete_is_caught() -> None:
    engine = Engine(parse_config({"evaluators": {"tool_selection": {}, "tool_parameters": {}}}))
    keep = CollectingSink()
    run_offline([str(FIXTURES / "strands" / "strands_trajectory.jsonl")], engine, keep)
    (result,) = [r for r in keep.results if "destructive" in r.trajectory.session_id]
    params = [v for v in result.verdicts if v.evaluator == "tool_parameters"]
    deletes = [s for s in result.trajectory.steps if s.kind == "tool_call"]
    assert [v.outcome for v in params] == ["pass", "fail"]
    assert [v.target.span_id for v in params] == [s.span_id for s in deletes]
    assert "path='/etc/app.conf' comes from nothing in the request" in params[1].explanation


def test_the_llm_version_asks_about_the_call_and_parses_the_answer() -> None:
    traj = trajectory(CSV_REQUEST, Load("csv-report"), Tool("read_csv", {"path": "data.csv"}))
    reply = json.dumps({"rating": "no", "rationale": "the request names sales.csv"})
    with chat_server(completion(reply)) as server:
        judge = OpenAIJudge(
            base_url=server.base_url, model="m", policy=CallPolicy(max_retries=0, timeout_s=5)
        )
        (verdict,) = ToolParameters().evaluate(_ctx(traj, judge))
    (sent,) = server.requests
    user = sent["messages"][1]["content"]
    assert user.startswith("QUESTION (tool_parameters)")
    assert '"path": "data.csv"' in user and "TOOL_CALL" in user
    assert (verdict.outcome, verdict.judge) == ("fail", "llm:m")
    assert verdict.target.span_id == "span-2"
