"""JUnit XML: one testsuite per session, one testcase per verdict (CI systems show them)."""

from __future__ import annotations

from typing import Any, TextIO

from spanjudge.emit.markup import xml_escape as escape
from spanjudge.emit.markup import xml_quoteattr as quoteattr
from spanjudge.emit.summary import Summary, outside_coverage
from spanjudge.values import SessionResult, Verdict


class JunitWriter:
    """``strict``: a verdict that could not be judged is a failure, as `--strict` makes it for
    the exit status (a question that did not arise stays skipped)."""

    def __init__(self, out: TextIO, strict: bool = False) -> None:
        self.out = out
        self.strict = strict

    def begin(self) -> None:
        self.out.write('<?xml version="1.0" encoding="UTF-8"?>\n<testsuites name="spanjudge">\n')

    def session(self, result: SessionResult) -> None:
        t = result.trajectory
        failing = [self._fails(v) for v in result.verdicts]
        fails = sum(failing)
        skipped = sum(
            1
            for v, f in zip(result.verdicts, failing, strict=True)
            if not f and v.outcome != "pass"
        )
        self.out.write(
            f'  <testsuite name={quoteattr(t.session_id)} tests="{len(result.verdicts)}" '
            f'failures="{fails}" errors="0" skipped="{skipped}" '
            f'time="{t.stats.duration_s:.3f}">\n'
        )
        for v, failed in zip(result.verdicts, failing, strict=True):
            target = (
                v.target.skill
                or v.target.tool_call_id
                or (f"turn {v.target.turn}" if v.target.turn is not None else "session")
            )
            name = f"{v.evaluator}[{target}]"
            score = "" if v.score is None else f" score={v.score:g}"
            self.out.write(
                f"    <testcase classname={quoteattr('spanjudge.' + v.evaluator)} "
                f"name={quoteattr(name)}>"
            )
            if v.outcome == "fail":
                self.out.write(
                    f"<failure message={quoteattr(v.label + score)} type={quoteattr(v.label)}>"
                    f"{escape(v.explanation)}</failure>"
                )
            elif failed:
                message = f"not evaluated ({v.reason}) and --strict is on: {v.explanation}"
                self.out.write(
                    f"<failure message={quoteattr(message)} type={quoteattr('not_evaluated')}>"
                    f"{escape(v.explanation)}</failure>"
                )
            elif v.outcome == "not_evaluated":
                self.out.write(f"<skipped message={quoteattr(f'{v.reason}: {v.explanation}')}/>")
            self.out.write(
                f"<system-out>{escape(v.explanation)} (judge: {escape(v.judge)})</system-out>"
            )
            self.out.write("</testcase>\n")
        self.out.write("  </testsuite>\n")

    def _fails(self, verdict: Verdict) -> bool:
        if verdict.outcome == "fail":
            return True
        return self.strict and verdict.outcome == "not_evaluated" and not outside_coverage(verdict)

    def end(self, summary: Summary, input_report: dict[str, Any]) -> None:
        self.out.write("</testsuites>\n")
