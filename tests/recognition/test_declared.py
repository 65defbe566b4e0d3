"""A convention declared in the configuration, without code: Haystack's spans, as its own
tracer writes them (fixtures/haystack), read with the built-in Haystack preset switched off and
compared with the generator's record of each scenario."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from spanjudge.config import parse_config
from spanjudge.emit.report import JsonReportWriter
from spanjudge.engine import Engine
from spanjudge.errors import ConfigError
from spanjudge.offline import run_offline
from spanjudge.recognition.registry import RecogniserRegistry
from tests.conftest import FIXTURES

LLM_OUT = "haystack.agent.step.llm.output"
HAYSTACK = {
    "haystack": {
        "session_key": "session.id",
        "claims": "haystack.*",
        "turn": {
            "span_name": "haystack.agent.run",
            "request": "haystack.agent.input#messages[role=user][-1].content[*].text",
            "answer": "haystack.agent.output#last_message.content[*].text",
        },
        "model_call": {
            "span_name": "haystack.agent.step.llm",
            "model": LLM_OUT + "#replies[0].meta.model",
            "input_tokens": LLM_OUT + "#replies[*].meta.usage.prompt_tokens",
            "output_tokens": LLM_OUT + "#replies[*].meta.usage.completion_tokens",
            "text": LLM_OUT + "#replies[*].content[*].text",
            "tool_calls": LLM_OUT + "#replies[*].content[*].tool_call",
            "finish_reason": LLM_OUT + "#replies[-1].meta.finish_reason",
            # a custom loader's catalogue is in the system prompt (JSON when no Tool is in it)
            "catalogue": "haystack.agent.step.llm.input#messages[role=system][0].content[*].text",
        },
        "tool_call": {
            "span_name": "haystack.agent.step.tool",
            "tool_name": "haystack.tool.name",
            "arguments": "haystack.agent.step.tool.input",
            "result": "haystack.agent.step.tool.output",
            "error": "haystack.tool.error",
            "catalogue": "haystack.tool.description",
        },
    }
}
RECORDS = json.loads((FIXTURES / "haystack" / "scenarios.json").read_text())["sessions"]


def _report() -> dict[str, Any]:
    config = parse_config({"conventions": HAYSTACK})
    builtin = [r for r in RecogniserRegistry.default().recognisers if r.name != "haystack"]
    registry = RecogniserRegistry([*config.sections["conventions"], *builtin])
    buf = io.StringIO()
    run_offline(
        [str(FIXTURES / "haystack" / "haystack.jsonl")],
        Engine(config, recognisers=registry),
        JsonReportWriter(buf),
    )
    return {s["session_id"]: s for s in json.loads(buf.getvalue())["sessions"]}


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    return _report()


@pytest.mark.parametrize("record", RECORDS, ids=[r["session_id"] for r in RECORDS])
def test_the_declared_haystack_convention_matches_each_scenario(report, record) -> None:  # type: ignore[no-untyped-def]
    got = report[record["session_id"]]
    assert [(x["skill"], x["status"]) for x in got["skill_loads"]] == [
        (x["skill"], x["status"]) for x in record["skill_loads"]
    ]
    for key in ("turns", "tool_calls", "model_calls", "errors", "retries", "backtracks"):
        assert got["stats"][key] == record[key], key
    for key in ("input_tokens", "output_tokens"):
        if record.get(key) is not None:
            assert got["stats"][key] == record[key], key
    assert got["final_answer"] == (record["final_answer"] or None)
    assert got["session_key_source"] == record["key_source"]
    steps = [
        (s["name"], s["arguments"])
        for s in got["steps"]
        if s["kind"] in ("tool_call", "skill_load")
    ]
    logged = [(c["name"], c.get("args")) for c in record["tool_log"]]
    if record["scenario"] == "parallel_tools":
        steps.sort(key=repr)
        logged.sort(key=repr)
    assert [n for n, _ in steps] == [n for n, _ in logged]
    for (_, args), (_, want) in zip(steps, logged, strict=True):
        assert all(args.get(k) == v for k, v in (want or {}).items())
    turn = next(s for s in got["steps"] if s["kind"] == "agent_turn")
    assert turn["text"] == record["request"]


def test_a_malformed_declaration_gives_one_clear_error_per_problem() -> None:
    bad = {
        "conventions": {
            "mine": {
                "turns": {"span_name": "run"},
                "tool_call": {"span_nam": "tool", "arguments": "args#a[", "result": 5},
                "model_call": {"span_name": "llm", "input_tokens": "#x"},
                "session_key": 3,
            },
            "empty": {},
        }
    }
    with pytest.raises(ConfigError) as info:
        parse_config(bad)
    problems = info.value.problems
    expected = [
        "conventions.mine.turns: unknown setting (did you mean 'turn'?)",
        "conventions.mine.tool_call.span_nam: unknown field (did you mean 'span_name'?)",
        "conventions.mine.tool_call.arguments: cannot read the path at '['",
        "conventions.mine.tool_call.result: expected 'attribute' or 'attribute#path', got 5",
        "conventions.mine.tool_call: say which spans these are",
        "conventions.mine.tool_call.tool_name: required",
        "conventions.mine.model_call.input_tokens: no attribute name before '#'",
        "conventions.mine.session_key: expected an attribute name, got 3",
        "conventions.empty: declares no role",
    ]
    for text in expected:
        assert sum(p.startswith(text) for p in problems) == 1, (text, problems)
    assert len(problems) == len(expected), problems


@pytest.mark.parametrize(
    "usage",
    [
        '{"prompt_tokens": NaN, "completion_tokens": "x"}',
        # a digit to `str.isdigit` and none to int(); a count no 64-bit integer holds
        '{"prompt_tokens": "\u00b2", "completion_tokens": 1e300}',
        '{"prompt_tokens": "' + "9" * 5000 + '", "completion_tokens": ' + "1" + "0" * 30 + "}",
    ],
)
def test_odd_values_in_declared_fields_cost_nothing(usage: str) -> None:
    from spanjudge.spans.record import SpanRecord

    config = parse_config({"conventions": HAYSTACK})
    declared = config.sections["conventions"][0]
    odd = {LLM_OUT: '{"replies": [{"meta": {"usage": ' + usage + "}}]}"}
    span = SpanRecord(
        trace_id="1" * 32,
        span_id="2" * 16,
        parent_span_id=None,
        name="haystack.agent.step.llm",
        start_unix_nano=0,
        end_unix_nano=1,
        attributes=odd,
    )
    steps = declared.recognise(span)
    assert steps is not None and steps[0].kind == "model_call"
    assert (steps[0].input_tokens, steps[0].output_tokens) == (None, None)
