"""What every networked judge shares: timeouts, retries with backoff, a concurrency limit, a result
cache, a circuit breaker for dead endpoints, and token/call accounting in OTel metrics."""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from opentelemetry import metrics

from spanjudge import semconv
from spanjudge.errors import JudgeError
from spanjudge.judges.base import Judgement, JudgeRequest
from spanjudge.judges.budget import (
    USAGE_KEY,
    Budget,
    BudgetMeter,
    Price,
    Usage,
    estimate_tokens,
)
from spanjudge.judges.evidence import check_evidence
from spanjudge.judges.guard import cross_check, masked, planted, settle
from spanjudge.judges.heuristic import HEURISTIC
from spanjudge.judges.prompts import build_messages, parse_reply, response_schema
from spanjudge.reasons import JUDGE_BUDGET

Messages = list[dict[str, str]]
log = logging.getLogger("spanjudge")


@dataclass(frozen=True, slots=True, kw_only=True)
class Reply:
    """A model's raw answer and the tokens it reported (None when not reported)."""

    text: str | None
    input_tokens: int | None = None
    output_tokens: int | None = None


class RetryableJudgeError(JudgeError):
    """A transient failure (429, 5xx, timeout, reset); ``retry_after_s`` from the server if sent."""

    def __init__(self, message: str, *, error_type: str, retry_after_s: float | None = None):
        super().__init__(message, retryable=True, error_type=error_type)
        self.retry_after_s = retry_after_s


@dataclass(frozen=True, slots=True, kw_only=True)
class CallPolicy:
    """How one networked judge calls its endpoint, and how long a session waits for it."""

    # A small model on a CPU takes tens of seconds per judgment; hosted APIs answer far sooner.
    timeout_s: float = 120.0
    max_retries: int = 3
    backoff_s: float = 0.5
    max_backoff_s: float = 8.0
    concurrency: int = 4
    cache_size: int = 512
    # After retries are exhausted on an unreachable endpoint, fail fast for this long.
    cooldown_s: float = 30.0
    # A session's judged verdicts wait this long at most (from the start of its evaluation), then
    # are not_evaluated / judge_timeout (evaluators/judging.py).
    deadline_s: float = 300.0
    # What its tokens cost, and how much it may spend an hour (judges/budget.py).
    price: Price | None = None
    budget: Budget | None = None


# (messages, JSON schema of the answer) -> the model's reply
Transport = Callable[[Messages, dict[str, Any]], Reply]


class CallCore:
    """Runs one judge request through cache, limiter, retries and the transport. Thread-safe."""

    def __init__(
        self,
        name: str,
        policy: CallPolicy,
        transport: Transport,
        *,
        meter_provider: metrics.MeterProvider | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.policy = policy
        self._transport = transport
        self._sleep = sleep
        self._clock = clock
        self._limit = threading.BoundedSemaphore(max(1, policy.concurrency))
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, Judgement] = OrderedDict()
        self._down_until = 0.0
        provider = meter_provider or metrics.get_meter_provider()
        meter = provider.get_meter(semconv.SJ_SCOPE_NAME)
        self._tokens = meter.create_counter(
            semconv.M_JUDGE_TOKENS, unit="{token}", description="Tokens used by LLM judges"
        )
        self._calls = meter.create_counter(
            semconv.M_JUDGE_CALLS, unit="{call}", description="LLM judge call attempts by outcome"
        )
        self._cost = meter.create_counter(
            semconv.M_JUDGE_COST,
            unit="{currency}",
            description="What LLM judges cost, at their configured price per million tokens",
        )
        self.budget = BudgetMeter(policy.budget, clock=clock)
        self._warned_estimate = False

    def _count(self, outcome: str) -> None:
        self._calls.add(1, {semconv.SJ_JUDGE: self.name, semconv.JUDGE_CALL_OUTCOME: outcome})

    def _count_tokens(self, usage: Usage) -> None:
        for kind, value in (
            (semconv.GEN_AI_TOKEN_TYPE_INPUT, usage.input_tokens),
            (semconv.GEN_AI_TOKEN_TYPE_OUTPUT, usage.output_tokens),
        ):
            if value:
                self._tokens.add(
                    value, {semconv.SJ_JUDGE: self.name, semconv.GEN_AI_TOKEN_TYPE: kind}
                )

    @staticmethod
    def cache_key(name: str, kind: str, messages: Messages) -> str:
        return hashlib.sha256(json.dumps([name, kind, messages]).encode()).hexdigest()

    def run(self, request: JudgeRequest) -> Judgement:
        """The judgement, its `Usage` in ``details["judge_usage"]`` (no calls when cached)."""
        check_evidence(request)  # missing evidence: the heuristic's reason, and no call
        messages = build_messages(request)
        key = self.cache_key(self.name, request.kind, messages)
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
            down = self._clock() < self._down_until
        if hit is not None:
            self._count(semconv.JUDGE_OUTCOME_CACHED)
            cached = Usage(cost=None if self.policy.price is None else 0.0)
            return replace(hit, details={**hit.details, USAGE_KEY: cached.to_json()})
        if down:
            self._count(semconv.JUDGE_OUTCOME_UNAVAILABLE)
            raise JudgeError(
                f"{self.name}: endpoint failed recently; not retrying for "
                f"{self.policy.cooldown_s:g}s",
                error_type="judge_unavailable",
            )
        usage = Usage(cost=None if self.policy.price is None else 0.0)
        judgement, usage = self._ask(request, messages, usage)
        quotes = planted(request) if request.kind == "custom" else []
        if quotes:
            # No heuristic answers a configured criterion: ask again without the planted sentences.
            again_request = masked(request)
            again: Judgement | JudgeError
            try:
                again, usage = self._ask(again_request, build_messages(again_request), usage)
            except JudgeError as exc:
                again = exc
            try:
                judgement = settle(quotes, judgement, again)
            except JudgeError as exc:
                exc.usage = usage.to_json()
                raise
        else:
            judgement = cross_check(request, judgement, HEURISTIC)
        self._count(semconv.JUDGE_OUTCOME_OK)
        with self._lock:
            self._cache[key] = judgement
            while len(self._cache) > self.policy.cache_size:
                self._cache.popitem(last=False)
        return replace(judgement, details={**judgement.details, USAGE_KEY: usage.to_json()})

    def _ask(
        self, request: JudgeRequest, messages: Messages, before: Usage
    ) -> tuple[Judgement, Usage]:
        """One judgement from the endpoint, within the budget; the usage so far with its own."""
        why = self.budget.spent()
        if why is not None:
            self._count(semconv.JUDGE_OUTCOME_OVER_BUDGET)
            raise JudgeError(f"{self.name}: {why}", error_type=JUDGE_BUDGET)
        started = self._clock()
        with self._limit:
            reply = self._send_with_retries(messages, response_schema(request))
        usage = before.plus(self._usage(reply, messages, self._clock() - started))
        try:
            return parse_reply(reply.text, request, self.name), usage
        except JudgeError as exc:
            self._count(semconv.JUDGE_OUTCOME_UNPARSEABLE)
            exc.usage = usage.to_json()
            raise

    def _usage(self, reply: Reply, messages: Messages, latency_s: float) -> Usage:
        tokens_in, tokens_out = reply.input_tokens, reply.output_tokens
        estimated = tokens_in is None or tokens_out is None
        if tokens_in is None:  # not reported: estimated, never counted as free
            tokens_in = estimate_tokens("".join(m["content"] for m in messages))
        if tokens_out is None:
            tokens_out = estimate_tokens(reply.text or "")
        if estimated and not self._warned_estimate:
            self._warned_estimate = True
            log.warning(
                "judge %s: the endpoint reports no token usage; its tokens are estimated "
                "(characters / 4) for the budget and the cost, marked estimated in the verdicts",
                self.name,
            )
        price = self.policy.price
        cost = None if price is None else price.cost(tokens_in, tokens_out)
        usage = Usage(
            calls=1,
            input_tokens=tokens_in,
            output_tokens=tokens_out,
            latency_s=latency_s,
            cost=cost,
            estimated=estimated,
        )
        self._count_tokens(usage)
        self.budget.add(usage)
        if cost:
            self._cost.add(cost, {semconv.SJ_JUDGE: self.name})
        return usage

    def _send_with_retries(self, messages: Messages, schema: dict[str, Any]) -> Reply:
        attempt = 0
        while True:
            try:
                reply = self._transport(messages, schema)
            except RetryableJudgeError as exc:
                if attempt >= self.policy.max_retries:
                    self._count(semconv.JUDGE_OUTCOME_ERROR)
                    with self._lock:
                        self._down_until = self._clock() + self.policy.cooldown_s
                    raise JudgeError(
                        f"{self.name}: giving up after {attempt + 1} attempts: {exc}",
                        error_type=exc.error_type,
                    ) from exc
                self._count(semconv.JUDGE_OUTCOME_RETRIED)
                delay = min(self.policy.max_backoff_s, self.policy.backoff_s * 2**attempt)
                if exc.retry_after_s is not None:
                    delay = min(self.policy.max_backoff_s, max(delay, exc.retry_after_s))
                self._sleep(delay)
                attempt += 1
                continue
            except JudgeError:
                self._count(semconv.JUDGE_OUTCOME_ERROR)
                raise
            with self._lock:
                self._down_until = 0.0
            return reply


def as_int(value: Any) -> int | None:
    """Token counts from a JSON payload: ints only (bools and junk are ignored)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
