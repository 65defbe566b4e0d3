"""Revision numbers, as a session's verdict ids carry them: a re-opened session is the next
revision, also after a restart (the record's) and while an earlier one is not yet confirmed."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from spanjudge.config import parse_config
from spanjudge.engine import Engine
from spanjudge.pipeline import Pipeline
from spanjudge.sessions import store as store_module
from spanjudge.sessions.revisions import Completion, Revisions
from spanjudge.sessions.store import ClosePolicy, SessionStore
from tests.conftest import span
from tests.support.memory import bytes_kept


class _Record:
    """A spool's record of confirmed revisions, in memory."""

    def __init__(self, confirmed: dict[str, int] | None = None) -> None:
        self.confirmed = dict(confirmed or {})

    def revision(self, key: str) -> int:
        return self.confirmed.get(key, 0)

    def complete(self, done: Sequence[Completion]) -> None:
        for item in done:
            self.confirmed[item.key] = max(item.revision, self.confirmed.get(item.key, 0))


def _closed_revision(store: SessionStore, n: int) -> int:
    store.add(span(n, trace=n, attrs={"session.id": "s"}))
    [closed] = store.close("shutdown")
    store.revisions.started(closed)
    store.revisions.evaluated(closed, 0)
    return closed.revision


def test_a_session_reopened_after_a_restart_continues_above_the_recorded_revision() -> None:
    store = SessionStore(revisions=Revisions(record=_Record({"s": 3})))
    store.add(span(1, attrs={"session.id": "s"}))
    [closed] = store.close("shutdown")
    assert closed.revision == 4
    assert not closed.partial  # replayed whole from the spool: not a partial re-open


def test_unconfirmed_revisions_are_not_handed_out_again_and_confirm_writes_the_record() -> None:
    record = _Record()
    revisions = Revisions(keep=0, record=record)  # the store forgets every closed revision
    store = SessionStore(revisions=revisions)
    assert _closed_revision(store, 1) == 1
    assert _closed_revision(store, 2) == 2  # revision 1 is still out: held by the ledger
    [first, second] = revisions.take_evaluated()
    assert revisions.take_evaluated() == []
    revisions.confirm(
        [
            Completion(key=e.session.key, revision=e.session.revision, groups=(), upto=0)
            for e in (first, second)
        ]
    )
    assert record.confirmed == {"s": 2}
    assert _closed_revision(store, 3) == 3


def test_without_a_record_nothing_waits_for_confirmation() -> None:
    store = SessionStore()
    assert _closed_revision(store, 1) == 1
    assert _closed_revision(store, 2) == 2  # re-opened: the store's memory
    assert store.revisions.take_evaluated() == []


def _failing_pipeline(keep: int) -> Pipeline:
    """A sidecar's pipeline (a record of confirmed revisions) whose every evaluation raises."""
    engine = Engine(parse_config({}))

    def broken(*_: object, **__: object) -> None:
        raise RuntimeError("an evaluation that fails")

    engine.trajectory = broken  # type: ignore[method-assign]
    policy = ClosePolicy(keep_closed_sessions=0, keep_closed_revisions=keep)
    store = SessionStore(policy, revisions=Revisions(keep, record=_Record()))
    return Pipeline(engine, store, [])


@pytest.mark.parametrize("keep", [0, 10])
@pytest.mark.usefixtures("contained_errors")  # fails on purpose
def test_a_failed_evaluation_keeps_its_revision_for_the_next_session_of_its_key(
    keep: int,
) -> None:
    pipeline = _failing_pipeline(keep=keep)
    for n in (1, 2, 3):
        pipeline.add([span(n, trace=n, attrs={"session.id": "s"})])
        pipeline.close_all("shutdown")
    assert pipeline.errors == 3
    pipeline.store.add(span(4, trace=4, attrs={"session.id": "s"}))
    [closed] = pipeline.store.close("shutdown")
    assert closed.revision == 4  # never one whose verdicts a sink may have taken


@pytest.mark.usefixtures("contained_errors")  # fails on purpose
def test_failed_evaluations_stay_within_bounded_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each failed session is never confirmed (the spool keeps its spans for a restart); the
    # ledger holds its revision among the most recent ones, not one entry per failure forever.
    # The traces the store remembers have a bound of their own, lowered here below the stream.
    monkeypatch.setattr(store_module, "_MAX_TRACE_KEYS", 400)
    kept: list[Pipeline] = []

    def stream(sessions: int) -> Callable[[], None]:
        def work() -> None:
            pipeline = _failing_pipeline(keep=50)
            kept.append(pipeline)
            for n in range(1, sessions + 1):
                pipeline.add([span(n, trace=n, attrs={"session.id": f"session-{n:06d}"})])
                pipeline.close_all("shutdown")
            assert pipeline.errors == sessions

        return work

    short, long = bytes_kept(stream(1_000)), bytes_kept(stream(4_000))
    assert long < 1.2 * short + 50_000, (short, long)
