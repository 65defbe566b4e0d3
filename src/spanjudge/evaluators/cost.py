"""`cost`: tokens, calls and latency against a budget or a reference trajectory
(ARCHITECTURE.md section 5).

Measured per session (ARCHITECTURE.md section 4 statistics): `input_tokens`, `output_tokens`,
`total_tokens`, `tool_calls`, `model_calls`, `duration_s`, and `cost` in currency when a price
table is configured. Options::

    budget: {total_tokens: 4000, tool_calls: 6, duration_s: 30, cost: 0.05}   # maxima
    reference: {tool_calls: 4, input_tokens: 1000}   # a good run of the same task
    max_ratio: 1.5          # allowed measured/reference ratio (default 1.5)
    prices: {"gpt-4o*": {input: 2.5, output: 10.0}}  # per million tokens; model names or globs
    currency: USD

Outcome: `fail` when a measure exceeds its budget or its reference times ``max_ratio``; every
exceeded limit is listed. Score: the worst limit/measured ratio, capped at 1 (1.0 on pass), so
the score histogram shows how far over budget runs go. `pass` when every limit holds.
`not_evaluated` with `no_budget` when neither a budget nor a reference is configured, with
`not_measured` when no configured measure was recorded (e.g. no token usage on the spans, or a
model without a price), and with `session_incomplete` when a cut-short session is still within
its limits (it can only grow). The measures are always in ``details["measured"]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from spanjudge import reasons
from spanjudge.evaluators.base import EvaluationContext, unknown_options
from spanjudge.evaluators.validity_rules import glob_to_regex
from spanjudge.reasons import NO_BUDGET, NOT_MEASURED, SESSION_INCOMPLETE
from spanjudge.trajectory.model import Trajectory
from spanjudge.values import Verdict, not_evaluated

NAME = reasons.COST
OPTIONS = ("budget", "reference", "max_ratio", "prices", "currency")
MEASURES = (
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "tool_calls",
    "model_calls",
    "duration_s",
    "cost",
)
DEFAULT_MAX_RATIO = 1.5
# how each measure reads in an explanation
_SPOKEN = {key: key.replace("_", " ") for key in MEASURES}


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0


def _measures(raw: Any, path: str, problems: list[str]) -> dict[str, float]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        problems.append(f"{path}: expected a mapping of measure -> number ({', '.join(MEASURES)})")
        return {}
    out = {}
    for key, value in raw.items():
        if key not in MEASURES:
            problems.append(f"{path}.{key}: unknown measure (known: {', '.join(MEASURES)})")
        elif not _number(value):
            problems.append(f"{path}.{key}: expected a non-negative number, got {value!r}")
        else:
            out[str(key)] = float(value)
    return out


def _prices(raw: Any, path: str, problems: list[str]) -> dict[str, tuple[float, float]]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        problems.append(
            f"{path}: expected {{model: {{input: price, output: price}}}} per 1M tokens"
        )
        return {}
    out = {}
    for model, price in raw.items():
        if (
            not isinstance(price, Mapping)
            or set(price) - {"input", "output"}
            or not all(_number(v) for v in price.values())
        ):
            problems.append(
                f"{path}.{model}: expected {{input: <price per 1M tokens>, output: <price>}}"
            )
            continue
        out[str(model)] = (float(price.get("input", 0.0)), float(price.get("output", 0.0)))
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Cost:
    """Budget and reference checks on what a session consumed."""

    name: str = NAME
    budget: Mapping[str, float] = field(default_factory=dict)
    reference: Mapping[str, float] = field(default_factory=dict)
    max_ratio: float = DEFAULT_MAX_RATIO
    prices: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    currency: str = "USD"

    @classmethod
    def from_options(cls, options: Mapping[str, Any], path: str, problems: list[str]) -> Cost:
        unknown_options(options, OPTIONS, path, problems)
        max_ratio = options.get("max_ratio", DEFAULT_MAX_RATIO)
        if not _number(max_ratio) or max_ratio <= 0:
            problems.append(f"{path}.max_ratio: expected a positive number, got {max_ratio!r}")
            max_ratio = DEFAULT_MAX_RATIO
        currency = options.get("currency", "USD")
        if not isinstance(currency, str) or not currency:
            problems.append(f"{path}.currency: expected a currency code such as USD")
            currency = "USD"
        cost = cls(
            budget=_measures(options.get("budget"), f"{path}.budget", problems),
            reference=_measures(options.get("reference"), f"{path}.reference", problems),
            max_ratio=float(max_ratio),
            prices=_prices(options.get("prices"), f"{path}.prices", problems),
            currency=currency,
        )
        if "cost" in {*cost.budget, *cost.reference} and not cost.prices:
            problems.append(f"{path}.prices: a cost budget or reference needs a price table")
        return cost

    def price_of(self, model: str | None) -> tuple[float, float] | None:
        if model is None:
            return None
        if model in self.prices:
            return self.prices[model]
        for pattern, price in self.prices.items():
            if glob_to_regex(pattern).match(model):
                return price
        return None

    def measure(self, t: Trajectory) -> tuple[dict[str, float | None], list[str]]:
        """Every measure (None when not recorded) and the models without a price."""
        s = t.stats
        total = None
        if s.input_tokens is not None or s.output_tokens is not None:
            total = (s.input_tokens or 0) + (s.output_tokens or 0)
        measured: dict[str, float | None] = {
            "input_tokens": s.input_tokens,
            "output_tokens": s.output_tokens,
            "total_tokens": total,
            "tool_calls": s.tool_calls,
            "model_calls": s.model_calls,
            "duration_s": s.duration_s,
        }
        unpriced: list[str] = []
        if self.prices:
            amount = 0.0
            for step in t.steps:
                if step.kind != "model_call":
                    continue
                price = self.price_of(step.model)
                if price is None:
                    unpriced.append(step.model or "(model not recorded)")
                    continue
                amount += (step.input_tokens or 0) * price[0] / 1e6
                amount += (step.output_tokens or 0) * price[1] / 1e6
            measured["cost"] = None if unpriced else round(amount, 9)
        return measured, sorted(set(unpriced))

    def evaluate(self, ctx: EvaluationContext) -> list[Verdict]:
        t = ctx.trajectory
        measured, unpriced = self.measure(t)
        limits = [(k, v, "budget", v) for k, v in self.budget.items()] if self.budget else []
        if self.reference:
            limits += [(k, v * self.max_ratio, "reference", v) for k, v in self.reference.items()]
        checks: list[dict[str, Any]] = []
        unmeasured: list[str] = []
        for key, limit, source, given in limits:
            value = measured.get(key)
            if value is None:
                unmeasured.append(key)
                continue
            check = {"measure": key, "value": value, "limit": limit, "source": source}
            if source == "reference":
                check["reference"] = given
                check["ratio"] = value / given if given else None
            checks.append(check)
        over = [c for c in checks if c["value"] > c["limit"]] if checks else []
        details: dict[str, Any] = {
            "measured": {k: v for k, v in measured.items() if v is not None},
            "checks": checks,
            "currency": self.currency if self.prices else None,
        }
        if unmeasured:
            details["not_measured"] = unmeasured
        if unpriced:
            details["unpriced_models"] = unpriced
        shown = _show(measured, self.currency)
        if over:
            score = min(min(1.0, c["limit"] / c["value"]) for c in over)
            listed = "; ".join(_describe(c, self.max_ratio) for c in over)
            return [
                Verdict(
                    evaluator=NAME,
                    outcome="fail",
                    score=round(score, 6),
                    label="over_" + over[0]["source"],
                    explanation=f"over limit: {listed} ({shown})",
                    details=details,
                )
            ]
        reason = why = None
        if not limits:
            reason, why = NO_BUDGET, "no budget or reference configured"
        elif not checks:
            reason, why = NOT_MEASURED, f"none of {', '.join(unmeasured)} was recorded"
        elif not t.complete:
            reason, why = (
                SESSION_INCOMPLETE,
                f"within limits so far, but cut short ({t.close_reason})",
            )
        if reason:
            return [
                not_evaluated(
                    NAME,
                    reason,
                    f"{why}; measured {shown}",
                    details=details,
                )
            ]
        missing = f"; not recorded: {', '.join(unmeasured)}" if unmeasured else ""
        return [
            Verdict(
                evaluator=NAME,
                outcome="pass",
                score=1.0,
                label="within_budget",
                explanation=f"within {len(checks)} limit(s){missing} ({shown})",
                details=details,
            )
        ]


def _describe(check: dict[str, Any], max_ratio: float) -> str:
    if check["source"] == "reference":
        ratio = check.get("ratio")
        times = f"{ratio:.2f}x" if ratio is not None else "more than"
        return (
            f"{check['measure']} {check['value']:g} is {times} the reference "
            f"{check['reference']:g} (allowed {max_ratio:g}x)"
        )
    return f"{check['measure']} {check['value']:g} > budget {check['limit']:g}"


def _show(measured: Mapping[str, float | None], currency: str) -> str:
    parts = []
    for key in MEASURES:
        value = measured.get(key)
        if value is None:
            continue
        if key == "cost":
            parts.append(f"cost {value:.6f} {currency}")
        elif key == "duration_s":
            parts.append(f"{value:.2f}s")
        else:
            parts.append(f"{_SPOKEN[key]} {value:g}")
    return ", ".join(parts)
