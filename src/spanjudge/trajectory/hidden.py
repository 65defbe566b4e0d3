"""Values an instrumentation hid: the placeholder is no value (ARCHITECTURE.md section 2)."""

from __future__ import annotations

import re

# What instrumentation writes for an output it hides (OpenInference's TraceConfig(hide_outputs=
# True): `__REDACTED__`; others `<redacted>`, `[REDACTED]`; Logfire's scrubbing `[Scrubbed due to
# 'session']`, naming what matched), once or once per copy.
_HIDDEN = re.compile(
    r"(?:\s*(?:_+redacted_+|<redacted[^>\n]*>|\[redacted\]|\[scrubbed due to [^\]\n]*\]))+\s*",
    re.I,
)


def hidden(text: str | None) -> bool:
    """``text`` is only the placeholder an instrumentation writes for a value it hid."""
    # Every placeholder starts, after blanks, with one of these: most texts are told apart
    # without running the pattern.
    if not text or text.lstrip()[:1] not in ("_", "<", "["):
        return False
    return _HIDDEN.fullmatch(text) is not None
