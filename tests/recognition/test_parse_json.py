"""Differential: `parse_json` (orjson where it can) decodes every JSON text exactly as
`json.loads` does, and leaves text that is not JSON as it was."""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from spanjudge.recognition.base import parse_json

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
    assert parse_json('"\\ud800"') == "\ud800"  # a lone surrogate: json reads it, orjson not
