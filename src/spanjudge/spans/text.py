"""Strings with no UTF-8 form: each lone surrogate becomes U+FFFD where a string enters.

JSON allows a `\\ud800` escape and Python strings may hold the code point (an SDK attribute, a
file name read with `surrogateescape`), but such a string cannot be encoded as UTF-8: every
report, export and scrape it reached would fail. Each adapter replaces it as it reads, as the
Collector's OTLP/JSON receiver does:
`spans.jsonfast.parse` for JSON text, `spans.sdk` for SDK spans and log records; the YAML and
JSON files a user writes (configuration, expectations, labels) are read the same way, so their
names match the trace's.
"""

from __future__ import annotations

from typing import Any


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
    """``text`` with each lone surrogate replaced by U+FFFD (``text`` itself when it has none).
    A high surrogate followed by a low one is the character the pair encodes (YAML, unlike
    JSON, leaves `"\\ud83d\\ude00"` as two code points), not two U+FFFD."""
    if not has_surrogates(text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def valid_strings(value: Any) -> Any:
    """``value`` (parsed JSON or YAML, fresh from its parser) with `valid_text` applied to every
    string in it, keys included. Lists and dicts are mended in place, walked without recursion:
    a document nested as deep as its parser reads, or a YAML alias that contains itself, is
    mended like any other."""
    if isinstance(value, str):
        return valid_text(value)
    pending = [value]
    seen: set[int] = set()
    while pending:
        node = pending.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, list):
            for i, item in enumerate(node):
                if isinstance(item, str):
                    node[i] = valid_text(item)
                elif isinstance(item, (list, dict)):
                    pending.append(item)
        elif isinstance(node, dict):
            items = list(node.items())
            node.clear()  # a key may change: put back in order
            for key, item in items:
                if isinstance(item, str):
                    item = valid_text(item)
                elif isinstance(item, (list, dict)):
                    pending.append(item)
                node[valid_text(key) if isinstance(key, str) else key] = item
    return value


def valid_yaml_strings(doc: Any, text: str) -> Any:
    """`valid_strings` of ``doc``, a YAML loader's reading of ``text`` (UTF-8 text, so no
    surrogate in it as such): only an escape in a double-quoted scalar (`"\\ud800"`) makes a
    lone surrogate, so a text with no backslash is not walked."""
    return valid_strings(doc) if "\\" in text else doc
