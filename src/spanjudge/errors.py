"""The small error hierarchy. User mistakes carry enough context to be printed as-is."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from spanjudge.reasons import JUDGE_ERROR


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """` (did you mean 'x'?)` for a near miss among ``choices``, else the empty string."""
    close = difflib.get_close_matches(str(word), list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def unknown_options(
    options: Mapping[str, Any], allowed: Sequence[str], path: str, problems: list[str]
) -> None:
    """Append a problem for each key of ``options`` not in ``allowed``, with a near miss."""
    for key in options:
        if key not in allowed:
            hint = f"allowed: {', '.join(allowed)}" if allowed else "this evaluator takes none"
            problems.append(f"{path}.{key}: unknown option{did_you_mean(key, allowed)} ({hint})")


def not_utf8(exc: UnicodeDecodeError) -> str:
    """What a file that is not UTF-8 text is told: its first byte that is not, and where."""
    return f"not UTF-8 text: byte 0x{exc.object[exc.start]:02x} at offset {exc.start}"


class SpanJudgeError(Exception):
    """Base class for every error spanjudge raises on purpose."""


class ConfigError(SpanJudgeError, ValueError):
    """Invalid configuration; the message names every problem with its path and the fix."""

    def __init__(self, problems: list[str] | str, *, source: str | None = None) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        self.source = source
        head = f"invalid configuration in {source}" if source else "invalid configuration"
        super().__init__(head + ":\n" + "\n".join(f"  - {p}" for p in self.problems))


class InputError(SpanJudgeError, ValueError):
    """Unreadable input: names the file, the line and the field."""

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None) -> None:
        self.file = file
        self.line = line
        self.detail = message
        where = ""
        if file is not None:
            where = f"{file}:{line}: " if line is not None else f"{file}: "
        super().__init__(where + message)


class OutputError(InputError):
    """The report cannot be written where it was asked to go (exit 2, like bad input)."""


class JudgeError(SpanJudgeError):
    """A judge could not produce a judgement; ``retryable`` says whether to try again."""

    def __init__(self, message: str, *, retryable: bool = False, error_type: str = JUDGE_ERROR):
        super().__init__(message)
        self.retryable = retryable
        self.error_type = error_type
        # What the failed judgement still cost (judges/budget.py `Usage.to_json`), when known.
        self.usage: dict[str, Any] | None = None
