"""Judged evaluators off the caller's thread: a bounded pool per judge and a deadline.

An LLM judge takes seconds per judgment. The evaluators that ask one run on that judge's pool
(``concurrency`` workers, the same setting that limits its calls in flight), all at once, while
the deterministic evaluators (and those using the instant heuristic judge) run on the caller's
thread. `Judging.start` returns at once with the session's `Judgments`: the online front ends
poll them (`ready`) and emit the session when they are in, so a slow judge on one session never
holds up another's; `verdicts` waits for them until the judge's ``deadline_s``, counted
from when the session's evaluation started; an evaluator still running then yields one
``not_evaluated`` verdict with reason ``judge_timeout``, and its late result is dropped. So a
session's verdicts are complete when they are in or when the deadline passes, whichever is first,
and a hung judge costs a session at most its deadline.

Workers are daemon threads: a judge stuck on a dead socket never keeps the process from exiting.
After ``fork`` the child starts fresh pools (threads do not survive a fork).
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from functools import partial
from typing import Any

from spanjudge.evaluators.base import EvaluationContext, Evaluator
from spanjudge.judges.heuristic import HEURISTIC
from spanjudge.reasons import JUDGE_TIMEOUT
from spanjudge.values import Verdict, not_evaluated

RunEvaluator = Callable[[Evaluator, EvaluationContext], list[Verdict]]


DEFAULT_DEADLINE_S = 300.0
DEFAULT_CONCURRENCY = 4

_Job = tuple["Future[list[Verdict]]", Callable[[], list[Verdict]]]


class JudgePool:
    """``workers`` daemon threads taking jobs from one queue. Thread-safe."""

    def __init__(self, name: str, workers: int) -> None:
        self.name = name
        self.workers = max(1, workers)
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def submit(self, fn: Callable[[], list[Verdict]]) -> Future[list[Verdict]]:
        future: Future[list[Verdict]] = Future()
        self._ensure_started()
        self._jobs.put((future, fn))
        return future

    def _ensure_started(self) -> None:
        import queue

        with self._lock:
            if self._pid != os.getpid():  # forked: the parent's threads are not here
                self._pid = os.getpid()
                self._jobs = queue.SimpleQueue()
                self._threads = []
            while len(self._threads) < self.workers:
                thread = threading.Thread(
                    target=self._work, name=f"spanjudge-judge-{self.name}", daemon=True
                )
                thread.start()
                self._threads.append(thread)

    def _work(self) -> None:
        jobs = self._jobs
        while True:
            job = jobs.get()
            if job is None:
                return
            future, fn = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn())
            except BaseException as exc:  # delivered to the waiting caller
                future.set_exception(exc)

    def shutdown(self) -> None:
        """Stop the workers once their current job ends; idempotent, never waits."""
        with self._lock:
            for _ in self._threads:
                self._jobs.put(None)
            self._threads = []


def _setting(judge: Any, key: str, default: float) -> float:
    policy = getattr(judge, "policy", None)
    value = getattr(policy, key, None) if policy is not None else None
    if value is None:
        value = getattr(judge, key, None)
    return float(value) if isinstance(value, (int, float)) and value > 0 else default


def _waits(judge: Any) -> bool:
    """The heuristic judge answers at once: its evaluators stay on the caller's thread."""
    return judge is not None and judge is not HEURISTIC and callable(getattr(judge, "judge", None))


@dataclass(frozen=True, slots=True, kw_only=True)
class _InFlight:
    job: Future[list[Verdict]]
    due: float  # clock time of its deadline
    deadline_s: float
    judge: Any


class Judgments:
    """One session's verdicts, some still with their judges: `ready` says whether `verdicts`
    would return without waiting."""

    __slots__ = ("_clock", "_done", "_names", "_pending")

    def __init__(
        self,
        names: Sequence[str],
        done: dict[int, list[Verdict]],
        pending: dict[int, _InFlight],
        clock: Callable[[], float],
    ) -> None:
        self._names = list(names)
        self._done = done
        self._pending = pending
        self._clock = clock

    @classmethod
    def complete(cls, verdicts: list[Verdict]) -> Judgments:
        """A session whose every verdict is in: the evaluators' verdicts in their order, as
        one part (nothing pending, so no part is ever named)."""
        return cls(("",), {0: verdicts}, {}, time.monotonic)

    def ready(self) -> bool:
        """Every judged verdict is in or past its deadline."""
        now = self._clock()
        return all(f.job.done() or now >= f.due for f in self._pending.values())

    def verdicts(self, *, until: float | None = None) -> list[Verdict]:
        """Verdicts in evaluator order; waits for each judged one until its deadline (or
        ``until``, a clock time, when that comes first: a flush or shutdown cutting it short).
        One still running then is `not_evaluated` / `judge_timeout`, its late result dropped."""
        done = dict(self._done)
        for i, flight in self._pending.items():
            from concurrent.futures import TimeoutError as FutureTimeout

            cut = flight.due if until is None else min(flight.due, until)
            try:
                done[i] = flight.job.result(timeout=max(0.0, cut - self._clock()))
            except FutureTimeout:
                flight.job.cancel()  # a job still queued never starts; a running one is dropped
                early = until is not None and until < flight.due
                done[i] = [_timed_out(self._names[i], flight.judge, flight.deadline_s, early)]
        return [v for i in range(len(self._names)) for v in done[i]]


class Judging:
    """Runs one session's evaluators: judged ones on their judge's pool, the rest inline."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._pools: dict[int, JudgePool] = {}
        self._lock = threading.Lock()

    def pool_for(self, judge: Any) -> JudgePool:
        with self._lock:
            pool = self._pools.get(id(judge))
            if pool is None:
                workers = int(_setting(judge, "concurrency", DEFAULT_CONCURRENCY))
                pool = JudgePool(str(getattr(judge, "name", "judge")), workers)
                self._pools[id(judge)] = pool
            return pool

    def start(
        self,
        evaluators: Sequence[Evaluator],
        contexts: Sequence[EvaluationContext],
        run_one: RunEvaluator,
        on_judged: Callable[[], None] | None = None,
    ) -> Judgments:
        """Submit the judged evaluators, run the rest here; ``on_judged`` is called (from a
        judge's thread) as each judged one finishes. ``run_one`` never raises (the engine's
        guard)."""
        pairs = list(zip(evaluators, contexts, strict=True))
        waits = [_waits(ctx.judge) for ctx in contexts]
        if True not in waits:  # every judge answers at once (the default): all run here
            verdicts: list[Verdict] = []
            for evaluator, ctx in pairs:
                verdicts += run_one(evaluator, ctx)
            return Judgments.complete(verdicts)
        started = self._clock()
        pending: dict[int, _InFlight] = {}
        for i, (evaluator, ctx) in enumerate(pairs):
            if waits[i]:
                deadline_s = _setting(ctx.judge, "deadline_s", DEFAULT_DEADLINE_S)
                job = self.pool_for(ctx.judge).submit(partial(run_one, evaluator, ctx))
                if on_judged is not None:
                    job.add_done_callback(lambda _job: on_judged())
                pending[i] = _InFlight(
                    job=job, due=started + deadline_s, deadline_s=deadline_s, judge=ctx.judge
                )
        done: dict[int, list[Verdict]] = {}
        for i, (evaluator, ctx) in enumerate(zip(evaluators, contexts, strict=True)):
            if i not in pending:
                done[i] = run_one(evaluator, ctx)
        return Judgments([e.name for e in evaluators], done, pending, self._clock)

    def run(
        self,
        evaluators: Sequence[Evaluator],
        contexts: Sequence[EvaluationContext],
        run_one: RunEvaluator,
    ) -> list[Verdict]:
        """Verdicts in evaluator order, waiting for the judged ones until their deadline."""
        return self.start(evaluators, contexts, run_one).verdicts()

    def shutdown(self) -> None:
        with self._lock:
            for pool in self._pools.values():
                pool.shutdown()
            self._pools.clear()


def _timed_out(evaluator: str, judge: Any, deadline_s: float, cut_short: bool) -> Verdict:
    name = str(getattr(judge, "name", "judge"))
    when = (
        f"before the flush or shutdown (within its {deadline_s:g}s deadline)"
        if cut_short
        else f"within the {deadline_s:g}s deadline (deadline_s)"
    )
    return not_evaluated(
        evaluator,
        JUDGE_TIMEOUT,
        f"judge {name} gave no verdict {when}; "
        "the session's other verdicts were emitted without it",
        judge=name,
        error_type="judge_timeout",
    )
