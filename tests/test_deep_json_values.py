"""Text that looks like JSON but nests deeper than a parser goes, in the attributes spanjudge
reads as JSON (expected skills, a terminal state, OpenInference metadata, an answer a
condition reads a path of): read as not JSON, and the run goes on with its report. In a
user's own JSON file it is a clear error naming the file."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from spanjudge.cli import main
from tests.conftest import FIXTURES

_DEEP = "[" * 3000


def _with_attribute(key: str, value: str, tmp_path: Path) -> Path:
    """The Strands fixture with ``key`` set to ``value`` on every request's first span."""
    text = (FIXTURES / "strands" / "strands_default.jsonl").read_text()
    entry = json.dumps({"key": key, "value": {"stringValue": value}}) + ","
    changed = re.sub(r'("spans":\[\{[^\[]*?"attributes":\[)', lambda m: m.group(1) + entry, text)
    assert changed != text
    path = tmp_path / "deep.jsonl"
    path.write_text(changed)
    return path


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("spanjudge.expected_skills", _DEEP),
        ("spanjudge.terminal_state", _DEEP),
        ("metadata", '{"spanjudge.task.id": ' + _DEEP),
    ],
)
def test_a_deep_value_is_no_json(
    key: str, value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["eval", str(_with_attribute(key, value, tmp_path)), "--format", "json"])
    out, err = capsys.readouterr()
    assert code in (0, 1), err  # 3 would be an internal error, with no report
    assert "failed" not in err and "Traceback" not in err
    assert json.loads(out)["sessions"]


def test_a_condition_on_a_deep_answer_is_not_met(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # every model call's output is the deep text: the answer a `json_path` condition reads
    text = (FIXTURES / "genai_manual" / "genai_manual.jsonl").read_text()
    output = [{"role": "assistant", "parts": [{"type": "text", "content": _DEEP}]}]
    deep = re.sub(
        r'("key":"gen_ai\.output\.messages","value":\{"stringValue":)"(?:[^"\\]|\\.)*"',
        lambda m: m.group(1) + json.dumps(json.dumps(output)),
        text,
    )
    assert deep != text
    trace = tmp_path / "trace.jsonl"
    trace.write_text(deep)
    expect = tmp_path / "expect.yaml"
    expect.write_text('sessions:\n  "*":\n    success: {json_path: $.total, equals: 280}\n')
    code = main(["eval", str(trace), "--expect", str(expect), "--format", "json"])
    _, err = capsys.readouterr()
    assert code in (0, 1), err
    assert "failed" not in err and "Traceback" not in err


def test_an_expectations_file_nested_too_deep_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expect = tmp_path / "expect.json"
    expect.write_text(_DEEP)
    trace = str(FIXTURES / "strands" / "strands_default.jsonl")
    code = main(["eval", trace, "--expect", str(expect)])
    _, err = capsys.readouterr()
    assert code == 2, err  # the user's file, not an internal error (3)
    assert str(expect) in err and "not valid JSON" in err
