"""Revision numbers, as a session's verdict ids carry them: a re-opened session is the next
revision, also after a restart (the record's) and while an earlier one is not yet confirmed."""

from __future__ import annotations

from collections.abc import Sequence

from spanjudge.sessions.revisions import Completion, Revisions
from spanjudge.sessions.store import SessionStore
from tests.conftest import span


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
