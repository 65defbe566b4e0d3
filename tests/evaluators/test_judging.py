"""Judged evaluators on their judge's pool: nothing waits past a judge's deadline, and
``concurrency`` judgments really are in flight at once."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from spanjudge import CollectingSink
from spanjudge.config import parse_config
from spanjudge.engine import Engine
from spanjudge.evaluators.base import EvaluationContext
from spanjudge.evaluators.judging import JudgePool
from spanjudge.judges.base import Judgement, JudgeRequest
from spanjudge.judges.reliability import CallPolicy
from spanjudge.offline import run_offline
from spanjudge.reasons import JUDGED_EVALUATORS, OPT_IN_EVALUATORS
from spanjudge.values import Verdict
from tests.conftest import FIXTURES

FIXTURE = FIXTURES / "genai_manual" / "genai_manual.jsonl"


class StuckJudge:
    """An LLM judge that answers only when the test lets it (or after 30 s)."""

    name = "llm:stuck"

    def __init__(self, deadline_s: float) -> None:
        self.policy = CallPolicy(deadline_s=deadline_s, concurrency=2)
        self.release = threading.Event()
        self.asked = 0
        self.answered = 0
        self._lock = threading.Lock()

    def judge(self, request: JudgeRequest) -> Judgement:
        with self._lock:
            self.asked += 1
        self.release.wait(30)
        with self._lock:
            self.answered += 1
        return Judgement(rating="yes", score=1.0, rationale="late", judge=self.name)


def test_a_judge_past_its_deadline_costs_only_its_verdicts() -> None:
    stuck = StuckJudge(deadline_s=0.05)
    engine = Engine(
        parse_config({}), judge_for=lambda name: stuck if name in JUDGED_EVALUATORS else None
    )
    keep = CollectingSink()
    try:
        run_offline([str(FIXTURE)], engine, keep)
        # Every session was emitted while the judge still held every judgment it was given.
        assert stuck.asked >= 1
        assert stuck.answered == 0
    finally:
        stuck.release.set()
    assert len(keep.results) >= 10
    timed_out = 0
    for result in keep.results:
        by_name: dict[str, list[Verdict]] = {}
        for verdict in result.verdicts:
            by_name.setdefault(verdict.evaluator, []).append(verdict)
        # The deterministic evaluators all reported, none of them waited or timed out.
        for name in ("skill_loaded", "trajectory_validity", "side_effects", "cost", "robustness"):
            assert by_name.get(name), (result.trajectory.session_id, name)
            assert all(v.reason != "judge_timeout" for v in by_name[name])
        for name in JUDGED_EVALUATORS:
            if name in OPT_IN_EVALUATORS:
                continue  # not built unless configured
            verdicts = by_name[name]
            assert all(v.outcome != "pass" or v.judge != stuck.name for v in verdicts)
            late = [v for v in verdicts if v.reason == "judge_timeout"]
            for verdict in late:
                assert verdict.outcome == "not_evaluated" and verdict.score is None
                assert verdict.judge == "llm:stuck"
                assert "0.05s deadline" in verdict.explanation
            timed_out += len(late)
    assert timed_out >= len(keep.results)


class Meeting:
    """Every judgment waits at a barrier of ``parties``: it passes only if that many are in
    flight at the same time; run one after another, each would wait out the barrier's timeout."""

    name = "llm:meeting"

    def __init__(self, parties: int, concurrency: int) -> None:
        self.policy = CallPolicy(concurrency=concurrency, deadline_s=60)
        self.barrier = threading.Barrier(parties, timeout=20)
        self.threads: set[tuple[str, int]] = set()

    def judge(self, request: JudgeRequest) -> Judgement:
        thread = threading.current_thread()
        self.threads.add((thread.name, thread.ident or 0))
        self.barrier.wait()
        return Judgement(rating="yes", score=1.0, rationale="met", judge=self.name)


@dataclass(frozen=True, slots=True, kw_only=True)
class Asks:
    """A judged evaluator that asks its judge one question."""

    name: str

    def evaluate(self, ctx: EvaluationContext) -> list[Verdict]:
        answer = ctx.judge.judge(JudgeRequest(kind="outcome", request="q"))
        return [
            Verdict(
                evaluator=self.name,
                outcome="pass",
                score=answer.score,
                label="yes",
                explanation=answer.rationale,
                judge=ctx.judge.name,
            )
        ]


def test_concurrency_4_puts_four_judgments_in_flight_at_once(tmp_path: Path) -> None:
    meeting = Meeting(parties=4, concurrency=4)
    names = ["a", "b", "c", "d"]
    engine = Engine(
        parse_config({}),
        evaluators=[Asks(name=n) for n in names],
        judge_for=lambda name: meeting,
    )
    keep = CollectingSink()
    run_offline([str(FIXTURE)], engine, keep)
    first = keep.results[0]
    assert [v.evaluator for v in first.verdicts] == names  # report order kept
    assert [v.explanation for v in first.verdicts] == ["met"] * 4
    assert all(v.explanation == "met" for r in keep.results for v in r.verdicts)
    assert len(meeting.threads) == 4
    assert all(name.startswith("spanjudge-judge-") for name, _ in meeting.threads)


@pytest.mark.usefixtures("contained_errors")  # fails on purpose
def test_concurrency_1_runs_judgments_one_at_a_time() -> None:
    meeting = Meeting(parties=2, concurrency=1)
    meeting.barrier = threading.Barrier(2, timeout=0.2)
    engine = Engine(
        parse_config({}),
        evaluators=[Asks(name="a"), Asks(name="b")],
        judge_for=lambda name: meeting,
    )
    keep = CollectingSink()
    run_offline([str(FIXTURE)], engine, keep)
    # One worker: the second judgment never meets the first, each barrier wait breaks.
    verdicts = keep.results[0].verdicts
    assert [v.reason for v in verdicts] == ["evaluator_error", "evaluator_error"]
    assert all("BrokenBarrierError" in v.explanation for v in verdicts)
    assert len(meeting.threads) == 1


def test_pool_workers_are_daemon_threads_and_shutdown_is_idempotent() -> None:
    pool = JudgePool("t", 2)
    assert pool.submit(lambda: []).result(timeout=5) == []
    assert all(t.daemon for t in pool._threads)
    pool.shutdown()
    pool.shutdown()


class Relay:
    """The first judgment asked waits until a second one starts (a later session's): it answers
    only when judgments of different sessions are in flight at once."""

    name = "llm:relay"

    def __init__(self) -> None:
        self.policy = CallPolicy(concurrency=2, deadline_s=10)
        self.second = threading.Event()
        self.first: str | None = None
        self._lock = threading.Lock()

    def judge(self, request: JudgeRequest) -> Judgement:
        with self._lock:
            first = self.first is None
            if first:
                self.first = request.request
            else:
                self.second.set()
        if first and not self.second.wait(10):
            raise TimeoutError("no other session's judgment started")
        return Judgement(rating="yes", score=1.0, rationale="relayed", judge=self.name)


@dataclass(frozen=True, slots=True, kw_only=True)
class AsksAboutSession:
    name: str = "asks"

    def evaluate(self, ctx: EvaluationContext) -> list[Verdict]:
        answer = ctx.judge.judge(JudgeRequest(kind="outcome", request=ctx.trajectory.session_id))
        return [
            Verdict(
                evaluator=self.name,
                outcome="pass",
                score=answer.score,
                label="yes",
                explanation=answer.rationale,
                judge=ctx.judge.name,
            )
        ]


def test_offline_judgments_of_different_sessions_overlap_and_the_report_keeps_close_order() -> None:
    relay = Relay()
    engine = Engine(parse_config({}), evaluators=[AsksAboutSession()], judge_for=lambda name: relay)
    keep = CollectingSink()
    run_offline([str(FIXTURE)], engine, keep)
    # The first session's judgment was answered only because a later session's started while
    # it was out: sessions were not judged one after another.
    assert relay.second.is_set()
    assert [v.explanation for r in keep.results for v in r.verdicts] == ["relayed"] * len(
        keep.results
    )
    plain = CollectingSink()
    run_offline([str(FIXTURE)], Engine(parse_config({})), plain)
    order = [r.trajectory.session_id for r in plain.results]
    assert [r.trajectory.session_id for r in keep.results] == order
    assert relay.first == order[0]


def test_an_evaluator_reusing_its_list_cannot_change_a_pending_sessions_verdicts() -> None:
    # One session waits for a judge while the next is evaluated: an evaluator that hands back
    # the same list each time (cleared and refilled) must not rewrite the first one's verdicts.
    from spanjudge.trajectory.assemble import SessionMeta, assemble

    class Reusing:
        name = "reusing"

        def __init__(self) -> None:
            self.out: list[Verdict] = []

        def evaluate(self, ctx: EvaluationContext) -> list[Verdict]:
            self.out.clear()
            session = ctx.trajectory.session_id
            self.out.append(
                Verdict(
                    evaluator="reusing",
                    outcome="pass",
                    score=1.0,
                    label=session,
                    explanation="its own list",
                )
            )
            return self.out

    gate = threading.Event()

    class Waiting:
        name = "waiting"

        def evaluate(self, ctx: EvaluationContext) -> list[Verdict]:
            gate.wait(10)
            return [
                Verdict(
                    evaluator="waiting",
                    outcome="pass",
                    score=1.0,
                    label="judged",
                    explanation="after the gate",
                )
            ]

    class SlowJudge:
        name = "llm:slow"
        policy = CallPolicy(deadline_s=10, concurrency=1)

        def judge(self, request: JudgeRequest) -> Judgement:
            raise AssertionError("not asked: the evaluator itself waits")

    judge = SlowJudge()
    engine = Engine(
        evaluators=[Reusing(), Waiting()],
        judge_for=lambda name: judge if name == "waiting" else None,
        start_warnings=False,
    )

    def trajectory(session: str) -> object:
        meta = SessionMeta(session_id=session, key_source="trace_id", complete=True)
        return assemble(meta, [], [])

    try:
        first = engine.begin(None, trajectory("session-1"))  # type: ignore[arg-type]
        second = engine.begin(None, trajectory("session-2"))  # type: ignore[arg-type]
        gate.set()
        labels = [(v.evaluator, v.label) for v in first.result().verdicts]
        assert labels == [("reusing", "session-1"), ("waiting", "judged")]
        assert second.result().verdicts[0].label == "session-2"
    finally:
        gate.set()
        engine.judging.shutdown()
