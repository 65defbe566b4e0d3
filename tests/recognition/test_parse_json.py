"""Differential: `parse_json` (orjson where it can) decodes every JSON text exactly as
`json.loads` does, and leaves text that is not JSON as it was."""

from __future__ import annotations

import json
import math
import warnings
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from spanjudge.recognition.base import DEPTH_MARK, LITERAL_CHARS, parse_json, parse_result

_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.integers(min_value=-(2**200), max_value=2**200),  # beyond 64 bits: orjson gives floats
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=12,
)


def _same(a: Any, b: Any) -> bool:
    """Equal, and of the same types throughout (1 == 1.0, so == alone would miss a float)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


@settings(max_examples=300, deadline=None)
@given(_VALUES, st.booleans())
def test_every_json_text_decodes_as_json_loads_decodes_it(value: Any, ascii_only: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only)
    if not text.startswith(("{", "[", '"')) and text not in ("true", "false", "null"):
        text = f"[{text}]"  # parse_json decodes documents, strings and literals
    assert _same(parse_json(text), json.loads(text)), text


def test_an_integer_beyond_64_bits_stays_an_exact_integer() -> None:
    text = '{"order_id": 123456789012345678901234567890, "ids": [18446744073709551616]}'
    assert parse_json(text) == {
        "order_id": 123456789012345678901234567890,
        "ids": [18446744073709551616],
    }
    assert isinstance(parse_json(text)["order_id"], int)


def test_text_that_is_not_json_comes_back_as_it_was() -> None:
    for text in ('{"path": "a.csv",}', "[1, 2", "region,amount\nnorth,1200", '"\\ud800 x'):
        assert parse_json(text) is text
    # a lone surrogate: orjson refuses it, json reads it, and it becomes U+FFFD (no UTF-8 form)
    assert parse_json('"\\ud800"') == "\ufffd"


# Every way JSON writes a number (json.dumps writes few of them: no `1E5`, no `-0`, no `2e-3`).
_NUMBER = st.from_regex(r"\A-?(0|[1-9][0-9]{0,24})(\.[0-9]{1,6})?([eE][+-]?[0-9]{1,3})?\Z")


@settings(max_examples=400, deadline=None)
@given(st.lists(_NUMBER, min_size=1, max_size=4), st.text(max_size=12))
def test_every_number_token_decodes_as_json_loads_decodes_it(numbers: list[str], text: str) -> None:
    for document in (
        f"[{', '.join(numbers)}]",
        f'{{"a": {numbers[0]}, "b": {json.dumps(text)}}}',
        f"[{json.dumps(text)}, {numbers[-1]}]",
    ):
        assert _same(parse_json(document), json.loads(document)), document


def test_integers_at_the_64_bit_edges_and_float_forms_decode_as_json_loads_does() -> None:
    for token in (
        "9223372036854775807",
        "-9223372036854775808",
        "-9223372036854775809",  # 19 digits, below the 64-bit range: orjson gives a float
        "18446744073709551615",
        "18446744073709551616",
        "1E5",
        "-0",
        "-0.0",
        "2e-3",
        "0.1",
    ):
        for document in (f"[{token}]", f'{{"v": {token}, "id": "4bf92f35"}}'):
            assert _same(parse_json(document), json.loads(document)), document
    # digits before a dot or an e inside strings only: the same decoded values either way
    assert parse_json('{"v": "1.2", "id": "0e0e"}') == {"v": "1.2", "id": "0e0e"}


def test_json_nested_beyond_the_depth_limit_is_cut_there_and_within_it_decodes() -> None:
    """Deep nesting is judged by levels, not by how many brackets a text holds; what lies
    above the cut reads as written."""
    at_limit = '{"a": ' * 255 + "[1]" + "}" * 255  # 256 levels
    beyond = '{"skill": "csv-report", "filters": ' + "[" * 300 + "]" * 300 + "}"
    wide = json.dumps([[i] for i in range(1_000)])  # many brackets, two levels
    assert parse_json(at_limit) == json.loads(at_limit)
    cut: Any = [DEPTH_MARK]  # the 256th level holds the mark where the 257th list was
    for _ in range(254):
        cut = [cut]
    assert parse_json(beyond) == {"skill": "csv-report", "filters": cut}
    assert parse_json(wide) == json.loads(wide)


@settings(max_examples=200, deadline=None)
@given(_VALUES)
def test_a_json_result_decodes_as_parse_json_decodes_it(value: Any) -> None:
    text = json.dumps([value])
    assert _same(parse_result(text), parse_json(text)), text


_FINITE = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(_FINITE)
def test_a_result_written_as_a_python_literal_decodes_as_its_json_would(value: Any) -> None:
    text = str([value])  # as a framework records a tool's return with str()
    assert _same(parse_result(text), json.loads(json.dumps([value]))), text


def test_a_result_that_no_json_can_hold_or_too_long_to_try_stays_text() -> None:
    long = "{'status': 'error', 'error': '" + "x" * LITERAL_CHARS + "'}"
    for text in (
        "{'a', 'b'}",  # a set
        "{'data': b'raw'}",
        "{'ok': float('nan')}",  # a call: never run
        "{(1, 2): 'tuple key'}",
        "{'size': 1e999}",
        "[" * 10_000 + "]" * 10_000,
        "'status: error'",
        long,
    ):
        assert parse_result(text) is text, text[:40]
    assert parse_result("('a', [1, None, True])") == "('a', [1, None, True])"
    assert parse_result("[('a', 1), {'n': None, 'ok': True}]") == [
        ["a", 1],
        {"n": None, "ok": True},
    ]


def test_text_repr_never_writes_is_not_parsed_and_warns_nothing() -> None:
    # an invalid escape, a name, a call, an f-string: no literal `repr` writes
    texts = ["{'re': '\\d+'}", "{k0: 0}", "[Row(id=1)]", "{'a': f'{x}'}", "{'a': 1 + 2}"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert [parse_result(t) for t in texts] == texts
    assert [str(w.message) for w in caught] == []
