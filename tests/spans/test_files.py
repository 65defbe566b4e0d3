"""Reading recorded files: a pretty-printed OTLP JSON document however its first line is laid
out, and a JSON lines file whose first line is broken still named at that line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from spanjudge.errors import InputError
from spanjudge.spans.files import read_input
from spanjudge.spans.otlp_json import request_to_json_line, sdk_spans_to_request
from tests.conftest import recorded


def _line() -> str:
    def body(tracer):  # type: ignore[no-untyped-def]
        # an agent turn by its attributes (a trace without agent activity is no session)
        agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a"}
        chat = {"gen_ai.operation.name": "chat"}
        with (
            tracer.start_as_current_span("invoke_agent a", attributes=agent),
            tracer.start_as_current_span("chat", attributes=chat),
        ):
            pass

    return request_to_json_line(sdk_spans_to_request(recorded(body)))


def _inline_first_key(pretty: str) -> str:
    """`{\n  "resourceSpans": [` -> `{"resourceSpans": [` (as jq -c . | some formatters do)."""
    return re.sub(r"\A\{\s+", "{", pretty, count=1)


@pytest.mark.parametrize(
    "layout",
    [
        lambda doc: _inline_first_key(json.dumps(doc, indent=2)),
        lambda doc: "\n\n" + json.dumps(doc, indent=4),
        lambda doc: _inline_first_key(json.dumps(doc, indent=1)).replace("\n", "\r\n"),
    ],
)
def test_a_pretty_printed_document_is_read_wherever_it_starts(tmp_path: Path, layout) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "trace.json"
    path.write_text(layout(json.loads(_line())), encoding="utf-8")
    chunks = list(read_input(str(path)))
    assert sum(len(c.spans) for c in chunks) == 2
    assert all(c.problems == [] for c in chunks)


def test_a_broken_first_line_of_json_lines_is_reported_at_that_line(tmp_path: Path) -> None:
    line = _line()
    path = tmp_path / "t.jsonl"
    path.write_text(line[:-5] + "\n" + line + "\n", encoding="utf-8")
    with pytest.raises(InputError) as info:
        list(read_input(str(path)))
    assert info.value.line == 1 and "looks truncated" in str(info.value)


def test_a_line_that_is_not_json_at_all_is_not_called_truncated(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text("not json\n", encoding="utf-8")
    with pytest.raises(InputError) as info:
        list(read_input(str(path)))
    assert info.value.line == 1 and "invalid JSON" in str(info.value)
    assert "truncated" not in str(info.value)


def test_a_broken_pretty_printed_document_names_the_line_of_the_fault(tmp_path: Path) -> None:
    pretty = _inline_first_key(json.dumps(json.loads(_line()), indent=2)).splitlines()
    pretty[3] = pretty[3].replace('"', "", 1)
    path = tmp_path / "t.json"
    path.write_text("\n".join(pretty), encoding="utf-8")
    with pytest.raises(InputError) as info:
        list(read_input(str(path)))
    assert "line 4" in str(info.value)


def test_spans_repeated_in_the_input_are_counted_and_reported(tmp_path: Path) -> None:
    import io

    from spanjudge.emit.report import JsonReportWriter
    from spanjudge.engine import Engine
    from spanjudge.offline import run_offline

    line = _line()
    path = tmp_path / "twice.jsonl"
    path.write_text(line + "\n" + line + "\n", encoding="utf-8")
    buf = io.StringIO()
    run_offline([str(path)], Engine(), JsonReportWriter(buf))
    report = json.loads(buf.getvalue())
    assert report["input"]["spans"] == 4 and report["input"]["duplicate_spans"] == 2
    assert any("2 span(s) repeated" in p for p in report["input"]["problems"])
    assert [s["spans"] for s in report["sessions"]] == [2]


def test_a_file_over_a_megabyte_is_read_the_same_from_its_first_line(tmp_path: Path) -> None:
    """Such a file takes the fast road from its first line (not only after the first megabyte):
    a pretty-printed document and a bad line are still read and named as in a small file."""
    doc = json.loads(_line())
    padding = {"key": "pad", "value": {"stringValue": "x" * (1 << 20)}}
    doc["resourceSpans"][0]["resource"]["attributes"].append(padding)
    pretty = tmp_path / "big.json"
    pretty.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    assert pretty.stat().st_size > 1 << 20
    assert sum(len(c.spans) for c in read_input(str(pretty))) == 2
    lines = tmp_path / "big.jsonl"
    line = json.dumps(doc)
    lines.write_text(line + "\n" + line[:-5] + "\n", encoding="utf-8")
    with pytest.raises(InputError) as info:
        list(read_input(str(lines)))
    assert info.value.line == 2 and "looks truncated" in str(info.value)
