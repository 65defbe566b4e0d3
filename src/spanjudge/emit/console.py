"""The console sink: one compact line per evaluated session on stderr, for development.

    spanjudge: session s-42: skill_loaded=PASS side_effects=FAIL cost=n/e -- side_effects: ...

Chosen by ``emit: {sinks: [console]}``, by ``SPANJUDGE_CONSOLE=1``, and by
`configure_opentelemetry` when no OTLP endpoint is configured (there is nowhere else the verdicts
would show). Outcomes are coloured by the terminal table's rules (`table.use_colour`).
"""

from __future__ import annotations

import os
import sys
from typing import TextIO

from spanjudge.emit.table import paint, use_colour
from spanjudge.values import SessionResult

NAME = "console"
ENV = "SPANJUDGE_CONSOLE"
# An evaluator gives several verdicts (one per skill, per tool call): the line shows the worst.
_RANK = {"fail": 0, "pass": 1, "not_evaluated": 2}
_EXPLANATION_WIDTH = 160
_SHORT = {"pass": "PASS", "fail": "FAIL", "not_evaluated": "n/e"}  # n/e as in the table's summary


def console_from_env() -> bool | None:
    """``SPANJUDGE_CONSOLE``: True for 1/true/yes/on, False for 0/false/no/off, else None."""
    value = (os.environ.get(ENV) or "").strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    return None


def console_line(result: SessionResult, colour: bool = False) -> str:
    """The session's line: its id, each evaluator's outcome, the first failing explanation."""
    trajectory = result.trajectory
    outcomes: dict[str, str] = {}
    for verdict in result.verdicts:
        seen = outcomes.get(verdict.evaluator)
        if seen is None or _RANK[verdict.outcome] < _RANK[seen]:
            outcomes[verdict.evaluator] = verdict.outcome
    marks = []
    for evaluator, outcome in outcomes.items():
        mark = _SHORT[outcome]
        marks.append(f"{evaluator}={paint(outcome, mark) if colour else mark}")
    notes = [f"revision {trajectory.revision}"] if trajectory.revision > 1 else []
    if not trajectory.complete:
        notes.append(f"cut short: {trajectory.close_reason}")
    line = (
        f"spanjudge: session {trajectory.session_id}"
        + (f" ({', '.join(notes)})" if notes else "")
        + ": "
        + (" ".join(marks) or "no verdicts")
    )
    failed = next((v for v in result.verdicts if v.outcome == "fail"), None)
    if failed is not None:
        why = " ".join(failed.explanation.split())
        if len(why) > _EXPLANATION_WIDTH:
            why = why[: _EXPLANATION_WIDTH - 1] + "…"
        line += f" -- {failed.evaluator}: {why}"
    return line


class ConsoleSink:
    """Writes `console_line` for each session to ``out`` (stderr by default)."""

    def __init__(self, out: TextIO | None = None, colour: bool | None = None) -> None:
        self._out = out
        self._colour = colour

    def emit(self, result: SessionResult) -> None:
        # stderr looked up at each line: a test or a redirect may have replaced it since.
        out = self._out or sys.stderr
        out.write(console_line(result, use_colour(self._colour, out)) + "\n")
        out.flush()

    def flush(self, timeout_s: float) -> bool:
        return True

    def shutdown(self) -> None:
        """Nothing to release: the stream is not the sink's own."""
