"""What a networked judge costs, and the hourly budget that stops it.

Configuration (both optional, under one judge of the ``judges`` section)::

    judges:
      openai:
        type: openai
        ...
        price: {input_per_million: 0.15, output_per_million: 0.60}   # your currency
        budget: {tokens_per_hour: 200000, cost_per_hour: 0.50}      # either or both

Every judgement a judge makes carries its usage (`Usage`: calls, input and output tokens,
latency and, with a ``price``, cost), which the judged verdict puts in its details as
``judge_usage`` and the report totals per evaluator and per judge.

The budget is counted in fixed windows of an hour from the judge's first call. A call starts only
while the window's use is below every limit; the call that crosses a limit (and calls already in
flight) finish and are counted. From then until the window rolls, the judge refuses (the
verdicts are ``not_evaluated`` / ``judge_budget``, counted as ``spanjudge.judge.calls`` with
outcome ``over_budget``); cached judgements cost nothing and are still answered. The count is per
process: with ``serve.workers`` N, each evaluation process gets 1/N of the budget
(`spanjudge.judges.registry.budget_share`), so that the figures bound what serve spends.

An endpoint that reports no token counts (no ``usage`` in its reply) is still counted: its tokens
are estimated (`estimate_tokens`: the prompt's and the reply's characters / 4), priced, and the
usage says ``estimated: true``; the judge logs a warning the first time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

WINDOW_S = 3600.0
USAGE_KEY = "judge_usage"


@dataclass(frozen=True, slots=True, kw_only=True)
class Price:
    """Per million tokens, in whatever currency the operator writes."""

    input_per_million: float
    output_per_million: float

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (
            input_tokens * self.input_per_million + output_tokens * self.output_per_million
        ) / 1_000_000


@dataclass(frozen=True, slots=True, kw_only=True)
class Budget:
    tokens_per_hour: int | None = None
    cost_per_hour: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """What one judgement cost: calls made (0 when answered from the cache), tokens the
    endpoint reported, wall time, and the cost when the judge has a price. ``estimated``: some
    reply reported no token counts, so its tokens (and their cost) are `estimate_tokens`'s."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    latency_s: float = 0.0
    cost: float | None = None
    estimated: bool = False

    def plus(self, other: Usage) -> Usage:
        cost = (
            None
            if self.cost is None and other.cost is None
            else ((self.cost or 0.0) + (other.cost or 0.0))
        )
        return Usage(
            calls=self.calls + other.calls,
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            latency_s=self.latency_s + other.latency_s,
            cost=cost,
            estimated=self.estimated or other.estimated,
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "calls": self.calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "latency_s": round(self.latency_s, 6),
        }
        if self.cost is not None:
            out["cost"] = self.cost
        if self.estimated:
            out["estimated"] = True
        return out


def estimate_tokens(text: str) -> int:
    """Tokens of ``text`` when the endpoint does not say: a character count / 4 (the usual
    rule of thumb for English with a BPE tokenizer), at least 1."""
    return max(1, -(-len(text) // 4))


def usage_of(details: Mapping[str, Any] | None) -> Usage | None:
    """The `Usage` a verdict's or judgement's details carry, if any."""
    raw = (details or {}).get(USAGE_KEY)
    if not isinstance(raw, Mapping):
        return None
    cost = raw.get("cost")
    return Usage(
        calls=int(raw.get("calls") or 0),
        input_tokens=int(raw.get("input_tokens") or 0),
        output_tokens=int(raw.get("output_tokens") or 0),
        latency_s=float(raw.get("latency_s") or 0.0),
        cost=float(cost) if isinstance(cost, (int, float)) else None,
        estimated=raw.get("estimated") is True,
    )


def with_usage(details: Mapping[str, Any] | None, usage: Usage | None) -> dict[str, Any] | None:
    """``details`` with ``usage`` added to what they already carry."""
    out = dict(details or {})
    if usage is None:
        return out or None
    before = usage_of(out)
    out[USAGE_KEY] = (before.plus(usage) if before else usage).to_json()
    return out


class BudgetMeter:
    """One judge's spending in the current window. Thread-safe."""

    def __init__(
        self, budget: Budget | None, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.budget = budget
        self._clock = clock
        self._lock = threading.Lock()
        self._window_start: float | None = None
        self._tokens = 0
        self._cost = 0.0

    def _roll(self, now: float) -> None:
        if self._window_start is None or now - self._window_start >= WINDOW_S:
            self._window_start = now
            self._tokens = 0
            self._cost = 0.0

    def spent(self) -> str | None:
        """Why no call may start now (the limit reached and when the window rolls), or None."""
        budget = self.budget
        if budget is None:
            return None
        with self._lock:
            now = self._clock()
            self._roll(now)
            start = self._window_start if self._window_start is not None else now
            rolls_in = max(0.0, WINDOW_S - (now - start))
            if budget.tokens_per_hour is not None and self._tokens >= budget.tokens_per_hour:
                return (
                    f"its budget of {budget.tokens_per_hour} tokens per hour is spent "
                    f"({self._tokens} used); the window rolls in {rolls_in:.0f}s"
                )
            if budget.cost_per_hour is not None and self._cost >= budget.cost_per_hour:
                return (
                    f"its budget of {budget.cost_per_hour:g} per hour is spent "
                    f"({self._cost:.6g} used); the window rolls in {rolls_in:.0f}s"
                )
        return None

    def add(self, usage: Usage) -> None:
        with self._lock:
            self._roll(self._clock())
            self._tokens += usage.input_tokens + usage.output_tokens
            self._cost += usage.cost or 0.0


def _number(value: Any, path: str, problems: list[str], *, whole: bool = False) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        problems.append(f"{path}: expected a number above 0, got {value!r}")
        return None
    if whole and not float(value).is_integer():
        problems.append(f"{path}: expected a whole number, got {value!r}")
        return None
    return int(value) if whole else float(value)


def parse_price(raw: Any, path: str, problems: list[str]) -> Price | None:
    keys = ("input_per_million", "output_per_million")
    if not isinstance(raw, Mapping):
        problems.append(
            f"{path}: expected {{input_per_million: X, output_per_million: Y}} (the price of a "
            f"million input and output tokens), got {raw!r}"
        )
        return None
    for key in raw:
        if key not in keys:
            problems.append(f"{path}.{key}: unknown setting (allowed: {', '.join(keys)})")
    values = {}
    for key in keys:
        if key not in raw:
            problems.append(f"{path}.{key}: required (the price of a million tokens)")
            continue
        value = raw[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            problems.append(f"{path}.{key}: expected a number of at least 0, got {value!r}")
            continue
        values[key] = float(value)
    if len(values) < len(keys):
        return None
    return Price(**values)


def parse_budget(raw: Any, path: str, problems: list[str]) -> Budget | None:
    keys = ("tokens_per_hour", "cost_per_hour")
    if not isinstance(raw, Mapping) or not any(k in raw for k in keys):
        problems.append(
            f"{path}: expected {{tokens_per_hour: N}} and/or {{cost_per_hour: X}}, got {raw!r}"
        )
        return None
    for key in raw:
        if key not in keys:
            problems.append(f"{path}.{key}: unknown setting (allowed: {', '.join(keys)})")
    tokens = cost = None
    if "tokens_per_hour" in raw:
        tokens = _number(raw["tokens_per_hour"], f"{path}.tokens_per_hour", problems, whole=True)
    if "cost_per_hour" in raw:
        cost = _number(raw["cost_per_hour"], f"{path}.cost_per_hour", problems)
    return Budget(tokens_per_hour=tokens, cost_per_hour=cost)
