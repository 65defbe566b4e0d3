"""Values an instrumentation hid: the placeholder is no value (ARCHITECTURE.md section 2)."""

from __future__ import annotations

import re

from spanjudge.lazy_re import LazyPattern

# What instrumentation writes for an output it hides (OpenInference's TraceConfig(hide_outputs=
# True): `__REDACTED__`; others `<redacted>`, `[REDACTED]`), once or once per copy.
_HIDDEN = LazyPattern(r"(?:\s*(?:_+redacted_+|<redacted[^>\n]*>|\[redacted\]))+\s*", re.I)


def hidden(text: str | None) -> bool:
    """``text`` is only the placeholder an instrumentation writes for a value it hid."""
    return bool(text) and _HIDDEN.fullmatch(text or "") is not None
