"""The fast JSON road (orjson + the strict decoder) reads exactly what the general road reads, and
hands everything else to it: invalid JSON, lone surrogates, NaN, integers beyond 64 bits, odd or
bad fields, values over a cap. Every test runs on both roads (tests/spans/conftest.py)."""

from __future__ import annotations

import base64
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from spanjudge.errors import InputError
from spanjudge.spans import jsonfast
from spanjudge.spans.files import read_input
from spanjudge.spans.limits import DEFAULT_LIMITS, Limits
from spanjudge.spans.logs import is_logs_document
from spanjudge.spans.otlp_json import decode_json_document
from spanjudge.spans.sizes import estimate_size
from tests.conftest import FIXTURES, ROOT

TRACE = "5b8efff798038103d269b633813fc60c"
SPAN = "eee19b7ec3c1b174"


def _doc(attributes: list[dict[str, Any]], **span: Any) -> dict[str, Any]:
    body = {
        "traceId": TRACE,
        "spanId": SPAN,
        "name": "execute_tool t",
        "kind": 1,
        "startTimeUnixNano": "1700000000000000000",
        "endTimeUnixNano": "1700000001000000000",
        "attributes": attributes,
        **span,
    }
    return {"resourceSpans": [{"scopeSpans": [{"spans": [body]}]}]}


def _fixture_lines() -> list[str]:
    lines = []
    for path in sorted(FIXTURES.glob("**/*.jsonl")):
        lines += [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return lines


def test_every_committed_fixture_line_takes_the_fast_road_with_the_same_spans(
    json_road: str,
) -> None:
    lines = _fixture_lines()
    assert len(lines) > 100
    for line in lines:
        if is_logs_document(json.loads(line)):
            continue  # a logs document (its records' carriers): the fast road reads traces
        records, problems = decode_json_document(json.loads(line))
        fast = jsonfast.decode_fast(line, DEFAULT_LIMITS)
        if json_road == "stdlib":
            assert fast is None
            continue
        assert problems == []
        assert fast == records


@pytest.mark.parametrize("escaped", [True, False], ids=["escaped", "raw"])
def test_the_sizes_the_fast_road_works_out_are_the_stores_estimates(
    json_road: str, escaped: bool
) -> None:
    """Non-ASCII text (raw or as \\u escapes), a repeated key, an array, events and a link."""
    if json_road == "stdlib":
        pytest.skip("without orjson there is no fast road")
    doc = _doc(
        [
            {"key": "a", "value": {"stringValue": "plain"}},
            {"key": "b", "value": {"stringValue": "caf\u00e9 \u4e2d\u6587 \U0001f600"}},
            {"key": "a", "value": {"stringValue": "the last value of a counts"}},
            {"key": "n", "value": {"intValue": "12"}},
            {"key": "arr", "value": {"arrayValue": {"values": [{"stringValue": "x\u00e9"}]}}},
        ],
        events=[
            {"name": "e", "timeUnixNano": "1", "attributes": [_text("m", "\u00fcber")]},
            {"name": "f", "timeUnixNano": "2"},
        ],
        links=[{"traceId": TRACE, "spanId": SPAN}],
    )
    sizes: list[int] = []
    records = jsonfast.decode_fast(json.dumps(doc, ensure_ascii=escaped), DEFAULT_LIMITS, sizes)
    assert records is not None
    assert sizes == [estimate_size(records[0])]
    plain = jsonfast.decode_fast(json.dumps(_doc([_text("a", "plain")])), DEFAULT_LIMITS, sizes)
    assert plain is not None
    assert sizes[1:] == [estimate_size(plain[0])]


def _text(key: str, value: str) -> dict[str, Any]:
    return {"key": key, "value": {"stringValue": value}}


def _write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "t.jsonl"
    path.write_text(text + "\n", encoding="utf-8")
    return str(path)


def test_integers_beyond_64_bits_are_read_exactly(tmp_path: Path) -> None:
    # orjson turns such literals into floats without a word; the general road keeps them exact
    line = json.dumps(
        _doc(
            [
                {"key": "big", "value": {"intValue": 2**64}},
                {"key": "small", "value": {"intValue": -(2**63) - 1}},
                {"key": "ratio", "value": {"doubleValue": 10**25}},
            ]
        )
    )
    assert "18446744073709551616" in line
    (chunk,) = read_input(_write(tmp_path, line))
    attributes = chunk.spans[0].attributes
    assert attributes["big"] == 18446744073709551616 and type(attributes["big"]) is int
    assert attributes["small"] == -9223372036854775809
    assert attributes["ratio"] == 1e25


def test_nan_and_infinity_are_read_as_the_standard_library_reads_them_lone_surrogates_replaced(
    tmp_path: Path,
) -> None:
    line = (
        json.dumps(
            _doc(
                [
                    {"key": "text", "value": {"stringValue": "x\ud800y"}},
                    {"key": "nan", "value": {"doubleValue": float("nan")}},
                    {"key": "inf", "value": {"doubleValue": float("inf")}},
                ]
            )
        ).replace("Infinity", "1e400")  # a literal that overflows: json gives inf, orjson refuses
    )
    assert "\\ud800" in line and "NaN" in line and "1e400" in line
    (chunk,) = read_input(_write(tmp_path, line))
    attributes = chunk.spans[0].attributes
    assert attributes["text"] == "x\ufffdy"  # as the Collector's OTLP/JSON receiver reads it
    assert math.isnan(attributes["nan"])  # type: ignore[arg-type]
    assert attributes["inf"] == math.inf


@pytest.mark.parametrize(
    ("attribute", "words"),
    [
        ({"key": "n", "value": {"intValue": "many"}}, "attributes[1].value.intValue"),
        ({"key": "d", "value": {"doubleValue": "much"}}, "attributes[1].value.doubleValue"),
        ({"value": {"stringValue": "no key"}}, "attributes[1]: expected an object"),
    ],
)
def test_a_bad_attribute_is_named_by_file_line_and_field(
    tmp_path: Path, attribute: dict[str, Any], words: str
) -> None:
    good = json.dumps(_doc([{"key": "a", "value": {"stringValue": "x"}}]))
    bad = json.dumps(_doc([{"key": "a", "value": {"stringValue": "x"}}, attribute]))
    chunks = list(read_input(_write(tmp_path, good + "\n" + bad)))
    assert [len(c.spans) for c in chunks] == [1, 0]
    (problem,) = chunks[1].problems
    assert chunks[1].line == 2
    assert words in f"{problem.path}: {problem.message}"


def test_an_invalid_line_keeps_json_s_message(tmp_path: Path) -> None:
    line = json.dumps(_doc([]))
    with pytest.raises(InputError) as info:
        list(read_input(_write(tmp_path, line + "\n" + line[:-1] + ",}")))
    assert info.value.line == 2
    assert "invalid JSON: Expecting property name enclosed in double quotes at column" in str(
        info.value
    )


_STR = {"stringValue": "text"}
_ODD_CASES: list[tuple[str, Any, Limits]] = [
    ("traceId", "g" * 32, DEFAULT_LIMITS),
    ("traceId", " " + TRACE[1:], DEFAULT_LIMITS),
    ("traceId", "0" * 32, DEFAULT_LIMITS),
    ("traceId", TRACE.upper(), DEFAULT_LIMITS),
    ("traceId", base64.b64encode(bytes.fromhex(TRACE)).decode(), DEFAULT_LIMITS),
    ("spanId", 12, DEFAULT_LIMITS),
    ("parentSpanId", SPAN, DEFAULT_LIMITS),
    ("parentSpanId", "AAAAAAAAAAA=", DEFAULT_LIMITS),
    ("name", 5, DEFAULT_LIMITS),
    ("name", None, DEFAULT_LIMITS),
    ("kind", 1.0, DEFAULT_LIMITS),
    ("kind", True, DEFAULT_LIMITS),
    ("kind", "SPAN_KIND_SERVER", DEFAULT_LIMITS),
    ("status", [1], DEFAULT_LIMITS),
    ("status", {"code": 2.0}, DEFAULT_LIMITS),
    ("status", {"code": 1, "message": ""}, DEFAULT_LIMITS),
    ("status", {"code": "STATUS_CODE_ERROR", "message": 5}, DEFAULT_LIMITS),
    ("startTimeUnixNano", 1.5, DEFAULT_LIMITS),
    ("startTimeUnixNano", " 17_00 ", DEFAULT_LIMITS),
    ("endTimeUnixNano", "1", DEFAULT_LIMITS),
    ("events", {"e": 1}, DEFAULT_LIMITS),
    ("events", [{"name": None, "timeUnixNano": "1"}], DEFAULT_LIMITS),
    ("events", [{"name": "e", "timeUnixNano": True}], DEFAULT_LIMITS),
    ("events", [{"name": "e"}, {"name": "f"}], Limits(max_events_per_span=1)),
    ("links", [{"traceId": TRACE, "spanId": "0" * 16}], DEFAULT_LIMITS),
    ("attributes", [{"key": 5, "value": _STR}], DEFAULT_LIMITS),
    ("attributes", [{"key": "a"}], DEFAULT_LIMITS),
    ("attributes", [{"key": "a", "value": {"stringValue": 5}}], DEFAULT_LIMITS),
    ("attributes", [{"key": "a", "value": _STR}], Limits(max_attr_chars=3)),
    (
        "attributes",
        [{"key": "a", "value": _STR}, {"key": "b", "value": _STR}],
        Limits(max_attrs_per_span=1),
    ),
    ("attributes", [{"key": "a", "value": {"boolValue": "false"}}], DEFAULT_LIMITS),
    ("attributes", [{"key": "a", "value": {"bytesValue": "aGk="}}], DEFAULT_LIMITS),
    (
        "attributes",
        [{"key": "a", "value": {"kvlistValue": {"values": [{"key": "k", "value": _STR}]}}}],
        DEFAULT_LIMITS,
    ),
    (
        "attributes",
        [{"key": "a", "value": {"arrayValue": {"values": [_STR, _STR]}}}],
        Limits(max_array_len=1),
    ),
    (
        "attributes",
        [{"key": "a", "value": {"arrayValue": {"values": [_STR]}}}],
        Limits(max_attr_chars=3),
    ),
    (
        "attributes",
        [{"key": "a", "value": {"arrayValue": {"values": [{"arrayValue": {}}]}}}],
        DEFAULT_LIMITS,
    ),
    ("attributes", [{"key": "a", "value": {"arrayValue": None}}], DEFAULT_LIMITS),
    ("attributes", [{"key": "a", "value": {}}], DEFAULT_LIMITS),
]


@pytest.mark.parametrize(("field", "value", "limits"), _ODD_CASES)
def test_odd_spellings_are_read_as_the_general_decoder_reads_them(
    tmp_path: Path, field: str, value: Any, limits: Limits
) -> None:
    doc = _doc([{"key": "x", "value": _STR}])
    doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0][field] = value
    line = json.dumps(doc)
    chunks = list(read_input(_write(tmp_path, line), limits))
    records, problems = decode_json_document(json.loads(line), limits)
    assert [c.spans for c in chunks] == [records]
    assert [c.problems for c in chunks] == [problems]


def test_loads_answers_as_json_loads_does_but_for_lone_surrogates() -> None:
    assert jsonfast.loads('{"a": "\\ud800", "b": [1, 2.5]}') == {"a": "\ufffd", "b": [1, 2.5]}
    assert math.isnan(jsonfast.loads(b"NaN"))
    with pytest.raises(json.JSONDecodeError) as info:
        jsonfast.loads('{"a": }')
    assert info.value.msg == "Expecting value" and info.value.colno == 7


def test_without_orjson_eval_reads_a_fixture_all_the_same(tmp_path: Path) -> None:
    fixture = FIXTURES / "strands" / "strands_default.jsonl"
    reports = []
    for block in ("", "sys.modules['orjson'] = None; "):
        out = tmp_path / f"report{len(reports)}.json"
        code = (
            f"import sys; {block}from spanjudge.spans import jsonfast; "
            "from spanjudge.cli import main; "
            "print(jsonfast.available()); "
            f"sys.exit(main(['eval', {str(fixture)!r}, '--format', 'json', '-q', '-o', "
            f"{str(out)!r}]))"
        )
        env = dict(os.environ, PYTHONPATH=str(ROOT / "src") + os.pathsep + str(ROOT))
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
        )
        assert done.returncode in (0, 1), done.stderr
        reports.append((done.stdout.strip(), json.loads(out.read_text())))
    (with_orjson, first), (without, second) = reports
    assert without == "False"
    if with_orjson == "False":
        pytest.skip("orjson is not installed here: both runs took the standard library road")
    assert first["sessions"] and first["sessions"] == second["sessions"]
    assert first["input"] == second["input"]
