"""A value of a type its convention never writes (a number where arguments go, a list where a
content block's type goes, a count no integer of OTLP holds) is read for what it is: the span
keeps its step and nothing counts an internal error."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from spanjudge.cli import main
from spanjudge.recognition.registry import RecogniserRegistry
from tests.conftest import FIXTURES, span


@pytest.mark.parametrize(
    ("attrs", "kind"),
    [
        # a decorated tool's input: positional arguments that are not a list
        ({"traceloop.span.kind": "tool", "traceloop.entity.input": '{"args": 5}'}, "tool_call"),
        ({"traceloop.span.kind": "tool", "traceloop.entity.input": '{"args": true}'}, "tool_call"),
        (
            {"traceloop.span.kind": "tool", "traceloop.entity.input": '{"args": {"a": 1}}'},
            "tool_call",
        ),
        # a message content block whose type is not text
        (
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.input.messages": '[{"role": "user", "content": [{"type": []}]}]',
            },
            "model_call",
        ),
        (
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.input.messages": '[{"role": "user", "content": [{"type": {"a": 1}}]}]',
            },
            "model_call",
        ),
        # a tool result that looks like an error envelope but nests too deep, or whose status
        # is a digit only to `str.isdigit`
        (
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "lookup",
                "gen_ai.tool.call.result": '{"a": ' + "[" * 3000,
            },
            "tool_call",
        ),
        (
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "lookup",
                "gen_ai.tool.call.result": '{"status_code": "\u00b2", "error": "no"}',
            },
            "tool_call",
        ),
    ],
)
def test_an_odd_value_keeps_the_step(attrs: dict[str, Any], kind: str) -> None:
    registry = RecogniserRegistry.default()
    steps = registry.recognise_session([span(1, name="call", attrs=attrs)])
    assert registry.errors == 0
    assert [s.kind for s in steps] == [kind]


@pytest.mark.parametrize(
    "count",
    [
        {"stringValue": "\u00b2"},  # a digit to str.isdigit, none to int()
        {"stringValue": "9" * 5000},  # past Python's digit limit for int()
        {"stringValue": "1" + "0" * 400},  # an int no float holds
        {"doubleValue": 1e300},
    ],
)
def test_an_absurd_token_count_is_no_count(
    count: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # every model call of the Strands fixture reports its output tokens so
    text = (FIXTURES / "strands" / "strands_default.jsonl").read_text()
    odd = re.sub(
        r'("key":"gen_ai\.usage\.output_tokens","value":)\{[^}]*\}',
        lambda m: m.group(1) + json.dumps(count),
        text,
    )
    assert odd != text
    path = tmp_path / "odd.jsonl"
    path.write_text(odd)
    code = main(["eval", str(path), "--format", "json"])
    out, err = capsys.readouterr()
    assert code != 2  # (1: a verdict failed, as on the fixture itself)
    assert "failed" not in err and "Traceback" not in err  # no contained internal error
    sessions = json.loads(out)["sessions"]
    assert sessions
    calls = [s for session in sessions for s in session["steps"] if s["kind"] == "model_call"]
    assert calls and all(call["output_tokens"] is None for call in calls)
