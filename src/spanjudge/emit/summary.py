"""Running totals for a report: verdict counts, pass rate with coverage, per-task profiles."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from math import comb
from typing import Any

from spanjudge.reasons import NOT_APPLICABLE
from spanjudge.values import OUTCOMES, SessionResult, Verdict


def not_applicable(verdict: Verdict) -> bool:
    """The question did not arise (e.g. skill_omission when a skill was used): counted as
    not_evaluated, but not in the coverage denominator (ARCHITECTURE.md section 5:
    "all applicable")."""
    return verdict.outcome == "not_evaluated" and verdict.reason == NOT_APPLICABLE


def rates(counts: dict[str, int]) -> tuple[float | None, float | None]:
    """(pass rate, coverage): pass/(pass+fail) and (pass+fail)/(all applicable); None when
    undefined."""
    judged = counts["pass"] + counts["fail"]
    total = judged + counts["not_evaluated"] - counts.get("not_applicable", 0)
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
                if all(not_applicable(v) for v in verdicts):
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
            applicable = len(outcomes) - inapplicable
            scores = [r["scores"][name] for r in runs if name in r["scores"]]
            components[name] = {
                "kind": "evaluator",
                "runs": len(outcomes),
                "pass": passes,
                "fail": fails,
                "not_evaluated": outcomes.count("not_evaluated"),
                "not_applicable": inapplicable,
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
    not_applicable: int = 0

    def add(self, result: SessionResult) -> None:
        self.sessions += 1
        self.complete += int(result.trajectory.complete)
        counts, by_evaluator = self.verdicts, self.by_evaluator
        for verdict in result.verdicts:
            counts[verdict.outcome] += 1
            per = by_evaluator.get(verdict.evaluator)
            if per is None:  # (not a setdefault: its default would be built for every verdict)
                per = by_evaluator[verdict.evaluator] = {
                    **dict.fromkeys(OUTCOMES, 0),
                    "not_applicable": 0,
                }
            per[verdict.outcome] += 1
            if not_applicable(verdict):
                per["not_applicable"] += 1
                self.not_applicable += 1
        task_id = result.trajectory.task_id
        if task_id:
            self.tasks.setdefault(task_id, TaskProfile(task_id)).add(result)

    @property
    def failed(self) -> bool:
        return self.verdicts["fail"] > 0

    @property
    def not_evaluated(self) -> int:
        """Verdicts that could not be judged (not counting questions that did not arise)."""
        return self.verdicts["not_evaluated"] - self.not_applicable

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
