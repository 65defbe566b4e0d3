"""Running totals for a report: verdict counts, pass rate with coverage, per-task profiles."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from math import comb
from typing import Any

from spanjudge.engine import SessionResult
from spanjudge.evaluators.verdict import OUTCOMES, Verdict


def counts_of(verdicts: Sequence[Verdict]) -> dict[str, int]:
    out: dict[str, int] = dict.fromkeys(OUTCOMES, 0)
    for verdict in verdicts:
        out[verdict.outcome] += 1
    return out


def rates(counts: dict[str, int]) -> tuple[float | None, float | None]:
    """(pass rate, coverage): pass/(pass+fail) and (pass+fail)/all; None when undefined."""
    judged = counts["pass"] + counts["fail"]
    total = judged + counts["not_evaluated"]
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
    return {
        "n": len(values),
        "min": min(values),
        "median": statistics.median(values),
        "max": max(values),
        "spread": max(values) - min(values),
    }


@dataclass(slots=True)
class TaskProfile:
    """Every component of the trajectory vector across the runs of one task."""

    task_id: str
    runs: int = 0
    seeds: list[str] = field(default_factory=list)
    # evaluator -> per-run session outcome ("pass" only if every judged verdict of it passed)
    outcomes: dict[str, list[str]] = field(default_factory=dict)
    scores: dict[str, list[float]] = field(default_factory=dict)
    stats: dict[str, list[float]] = field(default_factory=dict)

    def add(self, result: SessionResult) -> None:
        self.runs += 1
        if result.trajectory.run_seed:
            self.seeds.append(result.trajectory.run_seed)
        by_eval: dict[str, list[Verdict]] = {}
        for verdict in result.verdicts:
            by_eval.setdefault(verdict.evaluator, []).append(verdict)
        for name, verdicts in by_eval.items():
            judged = [v for v in verdicts if v.outcome != "not_evaluated"]
            if not judged:
                outcome = "not_evaluated"
            else:
                outcome = "pass" if all(v.outcome == "pass" for v in judged) else "fail"
            self.outcomes.setdefault(name, []).append(outcome)
            scored = [v.score for v in judged if v.score is not None]
            if scored:
                self.scores.setdefault(name, []).append(min(scored))
        stats = result.trajectory.stats.to_json()
        for key, value in stats.items():
            if isinstance(value, (int, float)):
                self.stats.setdefault(key, []).append(float(value))

    def to_json(self) -> dict[str, Any]:
        components: dict[str, Any] = {}
        for name, outcomes in self.outcomes.items():
            passes = outcomes.count("pass")
            fails = outcomes.count("fail")
            judged = passes + fails
            components[name] = {
                "kind": "evaluator",
                "runs": len(outcomes),
                "pass": passes,
                "fail": fails,
                "not_evaluated": outcomes.count("not_evaluated"),
                "pass_rate": passes / judged if judged else None,
                "coverage": judged / len(outcomes) if outcomes else None,
                "pass_hat_k": {str(k): pass_hat_k(passes, judged, k) for k in range(1, judged + 1)},
                "outcomes": outcomes,
                "score": distribution(self.scores.get(name, [])),
            }
        for key, values in self.stats.items():
            components[f"stats.{key}"] = {"kind": "statistic", **distribution(values)}
        return {
            "task_id": self.task_id,
            "runs": self.runs,
            "seeds": self.seeds,
            "components": components,
        }


@dataclass(slots=True)
class Summary:
    sessions: int = 0
    complete: int = 0
    verdicts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    by_evaluator: dict[str, dict[str, int]] = field(default_factory=dict)
    tasks: dict[str, TaskProfile] = field(default_factory=dict)

    def add(self, result: SessionResult) -> None:
        self.sessions += 1
        self.complete += int(result.trajectory.complete)
        for verdict in result.verdicts:
            self.verdicts[verdict.outcome] += 1
            per = self.by_evaluator.setdefault(verdict.evaluator, dict.fromkeys(OUTCOMES, 0))
            per[verdict.outcome] += 1
        task_id = result.trajectory.task_id
        if task_id:
            self.tasks.setdefault(task_id, TaskProfile(task_id)).add(result)

    @property
    def failed(self) -> bool:
        return self.verdicts["fail"] > 0

    @property
    def not_evaluated(self) -> int:
        return self.verdicts["not_evaluated"]

    def to_json(self) -> dict[str, Any]:
        by_eval = {}
        for name, counts in self.by_evaluator.items():
            pass_rate, coverage = rates(counts)
            by_eval[name] = {**counts, "pass_rate": pass_rate, "coverage": coverage}
        return {
            "sessions": self.sessions,
            "sessions_complete": self.complete,
            "verdicts": dict(self.verdicts),
            "by_evaluator": by_eval,
        }
