"""The one place a regular expression written in configuration is compiled.

Python's `re` backtracks: a pattern such as ``^(a+)+$`` takes time exponential in the text it is
matched against, so one crafted request would hold an evaluation process for ever. A user pattern
therefore runs on RE2 (the `google-re2` package), whose matching time is linear in the text
whatever the pattern. RE2 has no backreferences and no look-around (the constructs that need
backtracking); a pattern using them cannot be made safe and is refused when the configuration
loads, at its config path. Python's ``\\Z`` is RE2's ``\\z``. Patterns the project writes itself
stay on `re`.
"""

from __future__ import annotations

import re
from typing import Protocol


class UserPattern(Protocol):
    """What callers use of a compiled user pattern (a `re.Pattern` has the same methods)."""

    @property
    def pattern(self) -> str: ...

    def search(self, text: str, /) -> object | None: ...

    def match(self, text: str, /) -> object | None: ...


class PatternError(ValueError):
    """A user pattern that is invalid, or uses what a linear-time engine cannot run."""


def compile_user_pattern(pattern: str, *, ignore_case: bool = False) -> UserPattern:
    """Compile a configured pattern for RE2; `PatternError` says why it cannot run."""
    try:
        # Python's message first for a pattern no engine takes: it names the position.
        re.compile(pattern)
    except re.error as exc:
        raise PatternError(str(exc)) from None
    import re2  # type: ignore[import-untyped]  # only when the configuration holds a pattern

    options = re2.Options()
    options.case_sensitive = not ignore_case
    options.log_errors = False  # the error is ours to report, at the config path
    try:
        compiled: UserPattern = re2.compile(pattern, options)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else exc
        if isinstance(detail, bytes):  # the binding hands RE2's message over as bytes
            detail = detail.decode(errors="replace")
        raise PatternError(
            f"{detail}: patterns run on RE2, a linear-time engine, which has no backreferences"
            " or look-around (write \\z for the end of the text)"
        ) from None
    return compiled
