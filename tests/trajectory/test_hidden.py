"""`hidden` (a value an instrumentation hid) and the id check tell texts apart without compiling a
regex first: the answers must be the regexes' own, whatever the text."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spanjudge.spans.ids import IdError, id_from_text
from spanjudge.trajectory.hidden import hidden

PLACEHOLDER = re.compile(
    r"(?:\s*(?:_+redacted_+|<redacted[^>\n]*>|\[redacted\]|\[scrubbed due to [^\]\n]*\]))+\s*",
    re.I,
)
PIECES = [
    "__REDACTED__",
    "_redacted_",
    "<redacted>",
    "<REDACTED by policy>",
    "[Redacted]",
    "[Scrubbed due to 'session']",
    "[scrubbed due to ]",
    "[Scrubbed due to 'a\n']",
    " ",
    "\u00a0",
    "\u2003",
    "\n",
    "\x1c",
    "x",
    "_",
    "<",
    "[",
    "redacted",
    "<red\nacted>",
    "",
]


@given(st.lists(st.sampled_from(PIECES), max_size=5).map("".join) | st.text(max_size=20))
def test_hidden_answers_as_the_placeholder_pattern(text: str) -> None:
    assert hidden(text) == (bool(text) and PLACEHOLDER.fullmatch(text) is not None)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("__REDACTED__", True),
        ("\u00a0 <redacted> [REDACTED]\n", True),
        ("", False),
        (None, False),
        ("the answer", False),
        ("_redacted_ but not", False),
        ("[redacted", False),
        ("[Scrubbed due to 'session']", True),
        ("[Scrubbed due to 'api_key'] [REDACTED]", True),
        ("[Scrubbed due to 'session'] and more", False),
    ],
)
def test_hidden_placeholders(text: str | None, expected: bool) -> None:
    assert hidden(text) is expected


HEX = re.compile(r"[0-9a-fA-F]+")


@given(st.text(alphabet="0123456789abcdefABCDEFgxG /+=_-\u0660", min_size=16, max_size=16))
def test_a_span_id_is_read_as_hex_exactly_when_it_is_hex(text: str) -> None:
    try:
        value: str | None = id_from_text(text, 8, "span id")
    except IdError:
        value = None
    if HEX.fullmatch(text) and text.strip("0"):
        assert value == text.lower()
    else:  # base64 of 12 bytes, or refused: never taken as hex
        assert value is None or (len(value) == 16 and value != text.lower())
