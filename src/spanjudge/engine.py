"""The core every front end shares: closed session -> trajectory -> verdicts -> result."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from spanjudge.config import Config
from spanjudge.emit.summary import outside_coverage
from spanjudge.errors import ConfigError
from spanjudge.evaluators.base import EvaluationContext, build_suite
from spanjudge.evaluators.custom import needs_llm_judge
from spanjudge.evaluators.judging import Judging, Judgments
from spanjudge.expectations import ExpectationResolver
from spanjudge.guard import Guard
from spanjudge.judges.registry import judge_lookup
from spanjudge.reasons import EVALUATOR_ERROR, GOAL_SUCCESS
from spanjudge.recognition import continuity, shapes
from spanjudge.recognition.answers import without_hidden_text
from spanjudge.recognition.reconcile import reconcile
from spanjudge.recognition.registry import RecogniserRegistry
from spanjudge.sampling import SessionFacts, left_out
from spanjudge.sessions.store import ClosedSession
from spanjudge.spans.logs import join
from spanjudge.trajectory.assemble import SessionMeta, assemble
from spanjudge.trajectory.model import Trajectory
from spanjudge.trajectory.skills import EMPTY_LIBRARY
from spanjudge.values import (
    Coverage,
    Expectation,
    SessionResult,
    Verdict,
    not_evaluated,
    skill_key,
)

if TYPE_CHECKING:
    from spanjudge.evaluators.base import Evaluator

# judge_for(evaluator_name) -> judge object or None; supplied by the judges package.
JudgeLookup = Callable[[str], Any]
log = logging.getLogger("spanjudge")


def coverage_of(
    trajectory: Trajectory, expectation: Expectation, verdicts: Sequence[Verdict]
) -> Coverage:
    loaded = set()
    with_body = from_directory = 0
    for load in trajectory.skill_loads:  # one pass over the loads
        if load.status == "loaded":
            loaded.add(skill_key(load.skill))
        if load.body_recorded:
            with_body += 1
        if load.body_source == "directory":
            from_directory += 1
    skipped: dict[str, int] = {}
    for verdict in verdicts:
        if verdict.outcome == "not_evaluated" and not outside_coverage(verdict):
            skipped[verdict.evaluator] = skipped.get(verdict.evaluator, 0) + 1
    expected = expectation.skills
    return Coverage(
        expected_skills=len(expected),
        expected_skills_loaded=sum(1 for s in expected if skill_key(s) in loaded) if loaded else 0,
        skill_invocations=len(trajectory.skill_loads),
        invocations_with_body=with_body,
        bodies_from_directory=from_directory,
        not_evaluated=skipped,
        catalogue_source=trajectory.catalogue_source,
        fallback_spans=len({s.span_id for s in trajectory.steps if s.preset == shapes.PRESET}),
    )


@dataclass(slots=True, kw_only=True)  # not frozen: `Evaluator.name` is a plain attribute
class _LeftOut:
    """Stands in for an evaluator whose sample or filter left the session out."""

    name: str
    verdict: Verdict

    def evaluate(self, ctx: EvaluationContext) -> list[Verdict]:
        return [self.verdict]


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingResult:
    """A session whose deterministic verdicts are in and judged ones may still be running."""

    trajectory: Trajectory
    expectation: Expectation
    judgments: Judgments
    started: float  # perf_counter when its evaluation began

    def ready(self) -> bool:
        """`result` would not wait: every judged verdict is in or past its deadline."""
        return self.judgments.ready()

    def result(self, *, until: float | None = None) -> SessionResult:
        """The session's result, waiting for judged verdicts until their deadline or
        ``until`` (a `time.monotonic` time), whichever is first."""
        verdicts = continuity.mark(self.trajectory, self.judgments.verdicts(until=until))
        return SessionResult(
            trajectory=self.trajectory,
            expectation=self.expectation,
            verdicts=tuple(verdicts),
            coverage=coverage_of(self.trajectory, self.expectation, verdicts),
            evaluation_duration_s=time.perf_counter() - self.started,
        )


class Engine:
    """Recognise, assemble and evaluate closed sessions. Thread-compatible, not thread-safe."""

    def __init__(
        self,
        config: Config | None = None,
        *,
        recognisers: RecogniserRegistry | None = None,
        evaluators: Sequence[Evaluator] | None = None,
        judge_for: JudgeLookup | None = None,
        start_warnings: bool = True,
    ) -> None:
        """``start_warnings``: say what the configuration cannot do (evaluators with no judge
        that can answer them) once, at start; False in the evaluation processes of
        `spanjudge serve`, whose serve process has said it."""
        self.config = config or Config()
        # conventions declared in the configuration are tried before the built-in presets
        self.recognisers = recognisers or RecogniserRegistry.default(
            self.config.sections.get("conventions", ())
        )
        self._from_config = evaluators is None
        problems: list[str] = []
        suite = build_suite(self.config.evaluators, problems)
        if problems:
            raise ConfigError(problems, source=self.config.source)
        self.evaluators = list(suite.evaluators if evaluators is None else evaluators)
        # which sessions each evaluator judges (`sample`, `when`; spanjudge/sampling.py)
        self.selector = suite.selector
        self.resolver = ExpectationResolver(self.config.entries, self.config.rules)
        self._add_goal_success()
        self.judge_for = judge_for or judge_lookup(self.config)
        # An evaluator exception is an `evaluator_error` verdict (contract); the guard logs it
        # once per evaluator and, under the test suite, re-raises it.
        self.guard = Guard("spanjudge", "evaluator")
        self.judging = Judging()
        self._warned_unjudged = not start_warnings
        self._warn_unjudged()

    def _asserted(self) -> bool:
        """Some expectation carries goal assertions."""
        return any(e.assertions for e in self.resolver.entries) or any(
            r.assertions for r in self.resolver.rules
        )

    def _add_goal_success(self) -> None:
        """goal_success is opt-in, and on once any expectation carries assertions (unless
        `evaluators.goal_success.enabled: false`): assertions written are assertions judged."""
        if not self._from_config or not self._asserted():
            return
        if any(e.name == GOAL_SUCCESS for e in self.evaluators):
            return
        options = dict(self.config.evaluators)
        options[GOAL_SUCCESS] = options.get(GOAL_SUCCESS) or {}
        problems: list[str] = []
        self.evaluators = list(build_suite(options, problems).evaluators)
        if problems:
            raise ConfigError(problems, source=self.config.source)

    def _warn_unjudged(self) -> None:
        """Say once, at start, that free-text criteria have no judge that can read them: their
        verdicts will all be `not_evaluated` / `no_judge` (goal_success only once some
        expectation carries assertions)."""
        if self._warned_unjudged:
            return
        asserted = self._asserted()
        names = [
            e.name
            for e in self.evaluators
            if needs_llm_judge(e, self.judge_for(e.name)) and (e.name != GOAL_SUCCESS or asserted)
        ]
        if not names:
            return
        self._warned_unjudged = True
        log.warning(
            "evaluators %s judge free-text criteria and have no LLM judge: their verdicts will "
            "be not_evaluated (no_judge); configure one under `judges:` and name it in the "
            "evaluator's `judge` (or call it `default`)",
            ", ".join(names),
        )

    def add_expectations(self, resolver: ExpectationResolver) -> None:
        """Add an expectations file's entries and rules to those from the configuration."""
        self.resolver = ExpectationResolver(
            [*self.resolver.entries, *resolver.entries], [*self.resolver.rules, *resolver.rules]
        )
        self._add_goal_success()
        self._warn_unjudged()

    def trajectory(self, closed: ClosedSession) -> Trajectory:
        library = self.config.sections.get("skills") or EMPTY_LIBRARY
        # log records' content onto their spans first: recognition reads it as span events
        joined = join(closed.spans)
        spans = joined.spans
        steps = reconcile(self.recognisers.recognise_session(spans), spans, library)
        meta = SessionMeta(
            session_id=closed.key,
            key_source=closed.key_source,
            complete=closed.complete,
            revision=closed.revision,
            close_reason=closed.reason,
            log_records=joined.records,
            log_records_unjoined=joined.unjoined,
        )
        trajectory = assemble(
            meta,
            spans,
            steps,
            effects=self.config.effects,
            skills=library,
        )
        return without_hidden_text(continuity.check(trajectory, spans))

    def evaluate(
        self, closed: ClosedSession, trajectory: Trajectory | None = None
    ) -> SessionResult:
        """Evaluate ``closed`` (its ``trajectory`` when the caller already assembled it),
        waiting for its judged verdicts until their deadline."""
        return self.begin(closed, trajectory).result()

    def begin(
        self,
        closed: ClosedSession,
        trajectory: Trajectory | None = None,
        *,
        on_judged: Callable[[], None] | None = None,
    ) -> PendingResult:
        """Run the deterministic evaluators now and start the judged ones on their judges'
        pools; ``on_judged`` is called from a judge's thread as each of those finishes."""
        started = time.perf_counter()
        trajectory = trajectory or self.trajectory(closed)
        expectation = self.resolver.resolve(trajectory)
        # Contexts differ only by judge: one per judge (most evaluators share theirs).
        shared = {"effects": self.config.effects}
        by_judge: dict[int, EvaluationContext] = {}
        contexts = []
        evaluators: list[Evaluator] = []
        selecting = self.selector.configured
        facts = SessionFacts(trajectory=trajectory, spans=closed.spans) if selecting else None
        for evaluator in self.evaluators:
            judge = self.judge_for(evaluator.name)
            if facts is not None:
                selection = self.selector.selection(evaluator.name, judged=judge is not None)
                skip = None if selection.everything else left_out(selection, facts)
                if skip is not None:
                    verdict = not_evaluated(evaluator.name, *skip, judge="rule")
                    evaluator, judge = _LeftOut(name=evaluator.name, verdict=verdict), None
            evaluators.append(evaluator)
            ctx = by_judge.get(id(judge))
            if ctx is None:
                ctx = by_judge[id(judge)] = EvaluationContext(
                    trajectory=trajectory, expectation=expectation, judge=judge, shared=shared
                )
            contexts.append(ctx)
        # LLM-judged evaluators run on their judge's pool, under its deadline (judging.py).
        judgments = self.judging.start(evaluators, contexts, self._run, on_judged)
        return PendingResult(
            trajectory=trajectory,
            expectation=expectation,
            judgments=judgments,
            started=started,
        )

    def _run(self, evaluator: Evaluator, ctx: EvaluationContext) -> list[Verdict]:
        try:
            # a copy: an evaluator may return a list it keeps (and reuses for its next session)
            produced = list(evaluator.evaluate(ctx))
            if not produced:
                raise RuntimeError("evaluator returned no verdict")
            return produced
        except BaseException as exc:  # an evaluator bug must not take the session down
            if isinstance(exc, KeyboardInterrupt):  # SystemExit from a plugin is a bug like any
                raise
            self.guard.failed(evaluator.name)
            return [
                not_evaluated(
                    evaluator.name,
                    EVALUATOR_ERROR,
                    f"evaluator raised {type(exc).__name__}: {exc}",
                    error_type=type(exc).__name__,
                )
            ]
