"""Running totals for a report: verdict counts, pass rate with coverage, per-task profiles.

This module owns the coverage rule every front end uses (report, table, HTML page, --strict,
JUnit): coverage = (pass + fail) / the verdicts that could have been judged. A not_evaluated
verdict whose reason is in `reasons.OUTSIDE_COVERAGE` (nothing configured to judge against, the
question did not arise, or the evaluator's sample or filter left the session out) is outside the
denominator, and listed apart with its count. Where a sample or filter left sessions out, the
sampled share (sessions judged / sessions seen) goes beside coverage.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from math import comb
from typing import Any

from spanjudge.judges.budget import USAGE_KEY, Usage, usage_of
from spanjudge.reasons import NOT_APPLICABLE, NOT_CONFIGURED, NOT_SELECTED, OUTSIDE_COVERAGE
from spanjudge.values import OUTCOMES, SessionResult, Verdict

# How the verdicts outside coverage are introduced where they are listed apart.
NOT_CONFIGURED_TITLE = "nothing configured to judge against"
DID_NOT_ARISE_TITLE = "the question did not arise"
NOT_SELECTED_TITLE = "left out by the evaluator's sample or filter"


def outside_coverage(verdict: Verdict) -> bool:
    """A not_evaluated verdict that is no coverage gap: counted as not_evaluated, but not in the
    coverage denominator, and never a reason for --strict to fail."""
    return verdict.outcome == "not_evaluated" and verdict.reason in OUTSIDE_COVERAGE


def rates(counts: dict[str, int]) -> tuple[float | None, float | None]:
    """(pass rate, coverage): pass/(pass+fail) and (pass+fail)/(what could have been judged);
    None when undefined."""
    judged = counts["pass"] + counts["fail"]
    total = judged + counts["not_evaluated"] - counts.get("outside_coverage", 0)
    pass_rate = counts["pass"] / judged if judged else None
    coverage = judged / total if total else None
    return pass_rate, coverage


def pass_hat_k(passes: int, runs: int, k: int) -> float | None:
    """pass^k: the chance that k runs drawn from these all pass (tau-bench's estimator)."""
    if runs < k or k <= 0:
        return None
    return comb(passes, k) / comb(runs, k)


def distribution(values: Sequence[float]) -> dict[str, float | int | None]:
    if not values:
        return {"n": 0, "min": None, "median": None, "max": None, "spread": None}
    import statistics  # with fractions and decimal: only for runs grouped by task

    return {
        "n": len(values),
        "min": min(values),
        "median": statistics.median(values),
        "max": max(values),
        "spread": max(values) - min(values),
    }


def _seed_key(run: dict[str, Any]) -> tuple[int, float, str]:
    seed = run["seed"]
    if seed is None:
        return (2, 0.0, run["session_id"])
    try:
        return (0, float(seed), "")
    except ValueError:
        return (1, 0.0, str(seed))


@dataclass(slots=True)
class TaskProfile:
    """Every component of the trajectory vector across the runs of one task
    (ARCHITECTURE.md section 5).

    Per run it keeps only the session id, the seed, one outcome and score per evaluator and the
    numeric measures, so memory grows with runs, not spans. `to_json` orders runs by seed.
    A run's outcome for an evaluator is `pass` only if every judged verdict of it passed,
    `not_evaluated` if none was judged; its score is the lowest judged score.
    """

    task_id: str
    runs: int = 0
    per_run: list[dict[str, Any]] = field(default_factory=list)

    @property
    def seeds(self) -> list[str]:
        return [r["seed"] for r in sorted(self.per_run, key=_seed_key) if r["seed"] is not None]

    def add(self, result: SessionResult) -> None:
        trajectory = result.trajectory
        self.runs += 1
        by_eval: dict[str, list[Verdict]] = {}
        for verdict in result.verdicts:
            by_eval.setdefault(verdict.evaluator, []).append(verdict)
        outcomes: dict[str, str] = {}
        inapplicable: set[str] = set()
        outside: set[str] = set()
        scores: dict[str, float] = {}
        measures: dict[str, float] = {}
        stats = {
            k: float(v)
            for k, v in trajectory.stats.to_json().items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)
        }
        for name, verdicts in by_eval.items():
            judged = [v for v in verdicts if v.outcome != "not_evaluated"]
            if not judged:
                outcomes[name] = "not_evaluated"
                if all(outside_coverage(v) for v in verdicts):
                    outside.add(name)
                if all(v.reason == NOT_APPLICABLE for v in verdicts):
                    inapplicable.add(name)
            else:
                outcomes[name] = "pass" if all(v.outcome == "pass" for v in judged) else "fail"
            scored = [v.score for v in judged if v.score is not None]
            if scored:
                scores[name] = min(scored)
            for verdict in verdicts:  # measures are reported whether or not a verdict was judged
                measured = (verdict.details or {}).get("measured")
                if not isinstance(measured, dict):
                    continue
                for key, value in measured.items():
                    number = isinstance(value, (int, float)) and not isinstance(value, bool)
                    if number and key not in stats:
                        measures[f"{name}.{key}"] = float(value)
        self.per_run.append(
            {
                "not_applicable": inapplicable,
                "outside_coverage": outside,
                "session_id": trajectory.session_id,
                "seed": trajectory.run_seed,
                "outcomes": outcomes,
                "scores": scores,
                "stats": stats,
                "measures": measures,
            }
        )

    def to_json(self) -> dict[str, Any]:
        runs = sorted(self.per_run, key=_seed_key)
        components: dict[str, Any] = {}
        evaluators = list(dict.fromkeys(n for r in runs for n in r["outcomes"]))
        for name in evaluators:
            # A run where the evaluator produced nothing (disabled, added later) is not judged.
            outcomes = [r["outcomes"].get(name, "not_evaluated") for r in runs]
            passes = outcomes.count("pass")
            fails = outcomes.count("fail")
            judged = passes + fails
            inapplicable = sum(1 for r in runs if name in r["not_applicable"])
            outside = sum(1 for r in runs if name in r["outside_coverage"])
            applicable = len(outcomes) - outside
            scores = [r["scores"][name] for r in runs if name in r["scores"]]
            components[name] = {
                "kind": "evaluator",
                "runs": len(outcomes),
                "pass": passes,
                "fail": fails,
                "not_evaluated": outcomes.count("not_evaluated"),
                "not_applicable": inapplicable,
                "outside_coverage": outside,
                "pass_rate": passes / judged if judged else None,
                "coverage": judged / applicable if applicable else None,
                "pass_hat_k": {str(k): pass_hat_k(passes, judged, k) for k in range(1, judged + 1)},
                "outcomes": outcomes,
                "score": {**distribution(scores), "values": [r["scores"].get(name) for r in runs]},
            }
        for kind, prefix, source in (("statistic", "stats.", "stats"), ("measure", "", "measures")):
            keys = list(dict.fromkeys(k for r in runs for k in r[source]))
            for key in keys:
                values = [r[source].get(key) for r in runs]
                present = [v for v in values if v is not None]
                components[prefix + key] = {"kind": kind, **distribution(present), "values": values}
        return {
            "task_id": self.task_id,
            "runs": self.runs,
            "seeds": [r["seed"] for r in runs if r["seed"] is not None],
            "sessions": [r["session_id"] for r in runs],
            "run_seeds": [r["seed"] for r in runs],
            "components": components,
        }


@dataclass(slots=True)
class Summary:
    sessions: int = 0
    complete: int = 0
    verdicts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    by_evaluator: dict[str, dict[str, int]] = field(default_factory=dict)
    tasks: dict[str, TaskProfile] = field(default_factory=dict)
    # (evaluator, reason) -> count of the not_evaluated verdicts outside coverage
    outside: dict[tuple[str, str], int] = field(default_factory=dict)
    # evaluator -> sessions it gave a verdict for / sessions its sample or filter left out
    # (one `not_sampled` or `filtered_out` verdict each)
    seen: dict[str, int] = field(default_factory=dict)
    left_out: dict[str, int] = field(default_factory=dict)
    # What LLM judges cost (judges/budget.py): totals of the verdicts' `judge_usage` details
    usage_by_evaluator: dict[str, Usage] = field(default_factory=dict)
    usage_by_judge: dict[str, Usage] = field(default_factory=dict)

    def add(self, result: SessionResult) -> None:
        self.sessions += 1
        self.complete += int(result.trajectory.complete)
        counts, by_evaluator, outside = self.verdicts, self.by_evaluator, self.outside
        seen = self.seen
        for name in {verdict.evaluator for verdict in result.verdicts}:
            seen[name] = seen.get(name, 0) + 1
        for verdict in result.verdicts:
            counts[verdict.outcome] += 1
            per = by_evaluator.get(verdict.evaluator)
            if per is None:  # (not a setdefault: its default would be built for every verdict)
                per = by_evaluator[verdict.evaluator] = {
                    **dict.fromkeys(OUTCOMES, 0),
                    "not_applicable": 0,
                    "outside_coverage": 0,
                }
            per[verdict.outcome] += 1
            if verdict.details is not None and USAGE_KEY in verdict.details:
                self._add_usage(verdict)
            if outside_coverage(verdict):
                per["outside_coverage"] += 1
                if verdict.reason == NOT_APPLICABLE:
                    per["not_applicable"] += 1
                key = (verdict.evaluator, verdict.reason or "")
                outside[key] = outside.get(key, 0) + 1
                if verdict.reason in NOT_SELECTED:
                    self.left_out[verdict.evaluator] = self.left_out.get(verdict.evaluator, 0) + 1
        task_id = result.trajectory.task_id
        if task_id:
            self.tasks.setdefault(task_id, TaskProfile(task_id)).add(result)

    def _add_usage(self, verdict: Verdict) -> None:
        usage = usage_of(verdict.details)
        if usage is None:
            return
        for totals, key in (
            (self.usage_by_evaluator, verdict.evaluator),
            (self.usage_by_judge, verdict.judge),
        ):
            before = totals.get(key)
            totals[key] = before.plus(usage) if before else usage

    def judge_usage(self) -> dict[str, Any] | None:
        """Judge calls, tokens, latency and cost per evaluator and per judge; None when no
        verdict asked a networked judge."""
        if not self.usage_by_judge:
            return None
        return {
            "by_evaluator": {k: u.to_json() for k, u in self.usage_by_evaluator.items()},
            "by_judge": {k: u.to_json() for k, u in self.usage_by_judge.items()},
        }

    @property
    def failed(self) -> bool:
        return self.verdicts["fail"] > 0

    @property
    def not_evaluated(self) -> int:
        """Verdicts that could have been judged and were not (the coverage gaps)."""
        return self.verdicts["not_evaluated"] - sum(self.outside.values())

    def sampled_share(self, evaluator: str) -> float | None:
        """Sessions the evaluator judged / sessions it saw; None when its sample and filter
        left none out (every session was its to judge)."""
        left, seen = self.left_out.get(evaluator, 0), self.seen.get(evaluator, 0)
        return (seen - left) / seen if left and seen else None

    def set_apart(self) -> list[tuple[str, list[tuple[str, str, int]]]]:
        """The verdicts outside coverage, as (title, [(evaluator, reason, count)]) for each of
        the three kinds that has any, so that a front end can list them apart."""
        configured = [(e, r, n) for (e, r), n in self.outside.items() if r in NOT_CONFIGURED]
        chosen = [(e, r, n) for (e, r), n in self.outside.items() if r in NOT_SELECTED]
        arose = [
            (e, r, n)
            for (e, r), n in self.outside.items()
            if r not in NOT_CONFIGURED and r not in NOT_SELECTED
        ]
        return [
            (title, rows)
            for title, rows in (
                (NOT_CONFIGURED_TITLE, configured),
                (DID_NOT_ARISE_TITLE, arose),
                (NOT_SELECTED_TITLE, chosen),
            )
            if rows
        ]

    def to_json(self) -> dict[str, Any]:
        by_eval = {}
        for name, counts in self.by_evaluator.items():
            pass_rate, coverage = rates(counts)
            reasons = {r: n for (e, r), n in self.outside.items() if e == name}
            by_eval[name] = {
                **{k: v for k, v in counts.items() if k != "outside_coverage"},
                "pass_rate": pass_rate,
                "coverage": coverage,
                "outside_coverage": reasons,
            }
            share = self.sampled_share(name)
            if share is not None:
                by_eval[name]["sampled_share"] = share
                by_eval[name]["sessions_left_out"] = self.left_out[name]
        out: dict[str, Any] = {
            "sessions": self.sessions,
            "sessions_complete": self.complete,
            "verdicts": dict(self.verdicts),
            "by_evaluator": by_eval,
        }
        usage = self.judge_usage()
        if usage is not None:
            out["judge_usage"] = usage
        return out
