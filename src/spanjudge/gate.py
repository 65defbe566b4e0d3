"""The release gate of `spanjudge eval`: its exit status from the verdicts, and the words that
say why (ARCHITECTURE.md section 9).

A gate that fails must say what failed it, and a gate that passes while evaluators crashed must
say so: `--strict` and `--fail-on-error` name the verdicts behind their decision on stderr.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from spanjudge.emit.summary import Summary, outside_coverage
from spanjudge.reasons import EVALUATOR_ERROR
from spanjudge.values import SessionResult

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3
_SHOWN = 12  # kinds of verdict named on stderr; the report has them all


@dataclass(slots=True)
class Tally:
    """What the gate needs beyond the summary's counts: which verdicts, and one session each."""

    not_evaluated: Counter[tuple[str, str]] = field(default_factory=Counter)
    errored: Counter[str] = field(default_factory=Counter)
    example: dict[tuple[str, str], str] = field(default_factory=dict)

    def add(self, result: SessionResult) -> None:
        for verdict in result.verdicts:
            if verdict.outcome != "not_evaluated" or outside_coverage(verdict):
                continue
            key = (verdict.evaluator, verdict.reason or "?")
            self.not_evaluated[key] += 1
            self.example.setdefault(key, result.trajectory.session_id)
            if verdict.reason == EVALUATOR_ERROR:
                self.errored[verdict.evaluator] += 1


class TallyingWriter:
    """A report writer that also keeps a `Tally` of what it writes."""

    def __init__(self, inner: Any, tally: Tally) -> None:
        self.inner = inner
        self.tally = tally

    def begin(self) -> None:
        self.inner.begin()

    def session(self, result: SessionResult) -> None:
        self.tally.add(result)
        self.inner.session(result)

    def end(self, summary: Summary, input_report: dict[str, Any]) -> None:
        self.inner.end(summary, input_report)


def _groups(counts: Counter[tuple[str, str]], example: dict[tuple[str, str], str]) -> str:
    parts = [
        f"{evaluator} [{reason}] x{n} (e.g. session {example[(evaluator, reason)]})"
        for (evaluator, reason), n in counts.most_common(_SHOWN)
    ]
    if len(counts) > _SHOWN:
        parts.append(f"and {len(counts) - _SHOWN} more kind(s), listed in the report")
    return "; ".join(parts)


def decide(
    summary: Summary, tally: Tally, *, strict: bool, fail_on_error: bool
) -> tuple[int, list[str]]:
    """The exit status and the stderr lines that explain it."""
    lines: list[str] = []
    code = EXIT_FAIL if summary.failed else EXIT_OK
    if tally.errored:
        total = sum(tally.errored.values())
        which = ", ".join(f"{name} x{n}" for name, n in tally.errored.most_common())
        verdict = (
            "--fail-on-error: failing"
            if fail_on_error
            else "--fail-on-error would fail the gate on these"
        )
        lines.append(
            f"spanjudge: warning: {total} verdict(s) not evaluated because an evaluator raised"
            f" ({EVALUATOR_ERROR}: {which}); {verdict}"
        )
        if fail_on_error:
            code = EXIT_FAIL
    if strict and tally.not_evaluated:
        total = sum(tally.not_evaluated.values())
        lines.append(
            f"spanjudge: --strict: failing on {total} not_evaluated verdict(s) that could have"
            f" been judged: {_groups(tally.not_evaluated, tally.example)}"
        )
        code = EXIT_FAIL
    return code, lines
