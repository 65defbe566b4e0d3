"""Strings with no UTF-8 form: each lone surrogate becomes U+FFFD where a string enters.

JSON allows a `\\ud800` escape and Python strings may hold the code point (an SDK attribute, a
file name read with `surrogateescape`), but such a string cannot be encoded as UTF-8: every
report, export and scrape it reached would fail. Each adapter replaces it as it reads, as the
Collector's OTLP/JSON receiver does and as a UTF-8 decoder with ``errors="replace"`` would:
`spans.jsonfast.parse` for JSON text, `spans.sdk` for SDK spans and log records; the YAML and
JSON files a user writes (configuration, expectations, labels) are read the same way, so their
names match the trace's.
"""

from __future__ import annotations

import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")


def has_surrogates(text: str) -> bool:
    """Whether ``text`` holds a lone surrogate (an ASCII string, the usual one, is not read)."""
    if text.isascii():
        return False
    # a surrogate is the only code point UTF-8 cannot encode; encoding is several times faster
    # than a regular-expression search over the same text
    try:
        text.encode()
    except UnicodeEncodeError:
        return True
    return False


def valid_text(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD (``text`` itself when it has none)."""
    return _SURROGATE.sub("\ufffd", text) if has_surrogates(text) else text


def valid_strings(value: Any) -> Any:
    """``value`` (parsed JSON or YAML) with `valid_text` applied to every string in it, keys
    included."""
    if isinstance(value, str):
        return valid_text(value)
    if isinstance(value, dict):
        return {valid_strings(k): valid_strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [valid_strings(v) for v in value]
    return value
