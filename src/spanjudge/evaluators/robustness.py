"""`robustness`: retries, backtracks and errors against thresholds (ARCHITECTURE.md section 5).

Counts follow ARCHITECTURE.md section 4 (`retries`, `backtracks`, `errors` = failed tool calls),
plus failed skill loads and the error rate (errors / tool calls). They are always reported in
``details`` with the span ids of each retry, backtrack and error, whatever the thresholds.
Options (maxima; a session passes at the limit)::

    max_retries: 1
    max_backtracks: 0
    max_errors: 2
    max_error_rate: 0.25      # errors / tool calls, 0..1
    max_failed_skill_loads: 0

Outcome: `fail` when a count exceeds its threshold (each one listed); score is 1.0 on pass and
on fail the worst (threshold + 1) / (count + 1) ratio, so larger overruns score lower. `pass`
when every configured threshold holds. `not_evaluated` with `no_thresholds` when none is
configured (the counts are still reported), and with `session_incomplete` when a cut-short
session is within its thresholds so far (counts only grow).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from spanjudge import reasons
from spanjudge.evaluators.base import EvaluationContext, unknown_options
from spanjudge.reasons import NO_THRESHOLDS, SESSION_INCOMPLETE
from spanjudge.values import Target, Verdict, not_evaluated

NAME = reasons.ROBUSTNESS
COUNTS = ("retries", "backtracks", "errors", "error_rate", "failed_skill_loads")
OPTIONS = tuple(f"max_{c}" for c in COUNTS)
# how each count reads in an explanation
_SPOKEN = {count: count.replace("_", " ") for count in COUNTS}


@dataclass(frozen=True, slots=True, kw_only=True)
class Robustness:
    """Thresholds on how much a session stumbled."""

    name: str = NAME
    thresholds: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def from_options(cls, options: Mapping[str, Any], path: str, problems: list[str]) -> Robustness:
        unknown_options(options, OPTIONS, path, problems)
        thresholds: dict[str, float] = {}
        for key in OPTIONS:
            value = options.get(key)
            if value is None:
                continue
            count = key.removeprefix("max_")
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0
            if count == "error_rate":
                ok = ok and value <= 1
            elif ok and not float(value).is_integer():
                ok = False
            if not ok:
                want = "a number within 0..1" if count == "error_rate" else "a non-negative integer"
                problems.append(f"{path}.{key}: expected {want}, got {value!r}")
                continue
            thresholds[count] = float(value)
        return cls(thresholds=thresholds)

    def evaluate(self, ctx: EvaluationContext) -> list[Verdict]:
        t = ctx.trajectory
        s = t.stats
        # `errors` counts the failed tool calls: none, no pass over the steps to list them
        error_spans = (
            [x.span_id for x in t.steps if x.kind == "tool_call" and x.failed] if s.errors else []
        )
        failed_loads = (
            [x.span_id for x in t.skill_loads if x.status == "failed"] if t.skill_loads else []
        )
        counts: dict[str, float] = {
            "retries": s.retries,
            "backtracks": s.backtracks,
            "errors": s.errors,
            "error_rate": round(s.errors / s.tool_calls, 6) if s.errors and s.tool_calls else 0.0,
            "failed_skill_loads": len(failed_loads),
        }
        details: dict[str, Any] = {
            **counts,
            "tool_calls": s.tool_calls,
            "retry_span_ids": list(t.retry_span_ids),
            "backtrack_span_ids": list(t.backtrack_span_ids),
            "error_span_ids": error_spans,
            "failed_skill_load_span_ids": failed_loads,
            "thresholds": dict(self.thresholds),
            "measured": dict(counts),
        }
        rate = counts["error_rate"]
        shown = _shown(s.retries, s.backtracks, s.errors, len(failed_loads), rate, s.tool_calls > 0)
        over = (
            {k: counts[k] for k, limit in self.thresholds.items() if counts[k] > limit}
            if self.thresholds
            else None
        )
        if over:
            spans_of = {
                "retries": t.retry_span_ids,
                "backtracks": t.backtrack_span_ids,
                "errors": error_spans,
                "error_rate": error_spans,
                "failed_skill_loads": failed_loads,
            }
            evidence = tuple(dict.fromkeys(sid for k in over for sid in spans_of[k]))
            score = min((self.thresholds[k] + 1) / (v + 1) for k, v in over.items())
            listed = "; ".join(
                f"{_SPOKEN[k]} {v:g} > {self.thresholds[k]:g}" for k, v in over.items()
            )
            return [
                Verdict(
                    evaluator=NAME,
                    outcome="fail",
                    score=round(min(1.0, score), 6),
                    label="too_many_" + next(iter(over)),
                    explanation=f"over threshold: {listed} ({shown})",
                    target=Target(span_id=evidence[0] if evidence else None),
                    evidence=evidence,
                    details=details,
                )
            ]
        reason = why = None
        if not self.thresholds:
            reason, why = NO_THRESHOLDS, "no thresholds configured"
        elif not t.complete:
            reason, why = (
                SESSION_INCOMPLETE,
                f"within thresholds so far, cut short ({t.close_reason})",
            )
        stumbles = (
            tuple(dict.fromkeys([*t.retry_span_ids, *t.backtrack_span_ids]))
            if t.retry_span_ids or t.backtrack_span_ids
            else ()
        )
        if reason:
            return [
                not_evaluated(
                    NAME,
                    reason,
                    f"{why}; measured {shown}",
                    evidence=stumbles,
                    details=details,
                )
            ]
        limits = ", ".join(f"{_SPOKEN[k]} <= {v:g}" for k, v in self.thresholds.items())
        return [
            Verdict(
                evaluator=NAME,
                outcome="pass",
                score=1.0,
                label="within_thresholds",
                explanation=f"{shown} (thresholds: {limits})",
                evidence=stumbles,
                details=details,
            )
        ]


@lru_cache(maxsize=1024)
def _shown(
    retries: int, backtracks: int, errors: int, failed_loads: int, rate: float, rated: bool
) -> str:
    """The counts as an explanation reads them: sessions repeat the same few small counts."""
    counts = {
        "retries": retries,
        "backtracks": backtracks,
        "errors": errors,
        "failed_skill_loads": failed_loads,
    }
    shown = ", ".join(f"{_SPOKEN[k]} {v:g}" for k, v in counts.items())
    return shown + f", error rate {rate:.0%}" if rated else shown
