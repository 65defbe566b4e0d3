"""`Revisions`: the one ledger of session revisions and of their confirmation.

A session key's revision counts its evaluations: a session that re-opens (a late span, a restart
that replays it) is the next revision, so a verdict id is never reused. The store asks the
ledger for the revision of a session it opens; the pipeline tells it which sessions it handed
to evaluation and which it emitted; the owner that confirms (the sidecar, once every sink took
the verdicts) confirms through it, which writes the confirmation to the ledger's record (the
spool releases the session's rows and records the revision) and lets go of what it held.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from spanjudge.sessions.store import ClosedSession


MIN_FAILED = 1024  # failed evaluations whose revision is held whatever ``keep`` says


@dataclass(frozen=True, slots=True, kw_only=True)
class Completion:
    """An evaluated session whose spool rows may go: groups, the last request id it consumed."""

    key: str
    revision: int
    groups: tuple[str, ...]
    upto: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Evaluated:
    """A session whose result every sink took, with the ``mark`` its close was given."""

    session: ClosedSession
    mark: int


class Record(Protocol):
    """Where confirmed revisions outlive the process (the sidecar's spool)."""

    def revision(self, key: str) -> int:
        """The last revision of session ``key`` recorded as confirmed, 0 if none."""
        ...

    def complete(self, done: Sequence[Completion]) -> None:
        """Record ``done`` as confirmed (and release what it held); raises if it cannot."""
        ...


class Revisions:
    """Revision numbers per session key and, with a ``record``, their confirmation.

    Without a record (offline, the processor) a key's next revision is one above the last one
    closed, remembered for the ``keep`` most recent keys. With one, it is also above every
    revision the record holds, every one handed to evaluation and not yet confirmed, and the
    ``keep`` (at least `MIN_FAILED`) most recent ones whose evaluation failed (never confirmed:
    the spool keeps their spans); the sessions emitted wait in `take_evaluated` until `confirm`.
    """

    def __init__(self, keep: int = 100_000, record: Record | None = None) -> None:
        self.keep = keep
        self.record = record
        self._closed: OrderedDict[str, int] = OrderedDict()  # key -> last revision closed
        self._in_flight: dict[str, int] = {}  # key -> revision evaluated, not yet confirmed
        self._failed: OrderedDict[str, int] = OrderedDict()  # key -> revision never confirmed
        self._evaluated: list[Evaluated] = []

    def open(self, key: str) -> tuple[int, bool]:
        """The revision of a session of ``key`` that opens now, and whether it re-opens one
        closed here (one the ledger remembers)."""
        previous = self._closed.pop(key, None)
        last = previous or 0
        if self.record is not None:
            last = max(
                last,
                self.record.revision(key),
                self._in_flight.get(key, 0),
                self._failed.get(key, 0),
            )
        return last + 1, previous is not None

    def closed(self, key: str, revision: int) -> None:
        """``revision`` of ``key`` closed: the next session of ``key`` re-opens it."""
        closed = self._closed
        closed[key] = revision
        while len(closed) > self.keep:
            closed.popitem(last=False)

    def started(self, session: ClosedSession) -> None:
        """``session`` goes to evaluation: its revision is held until confirmed."""
        if self.record is not None:
            self._in_flight[session.key] = session.revision

    def evaluated(self, session: ClosedSession, mark: int) -> None:
        """Every sink took ``session``'s result (or it had none to give): it awaits `confirm`."""
        if self.record is not None:
            self._evaluated.append(Evaluated(session=session, mark=mark))

    def failed(self, session: ClosedSession) -> None:
        """``session``'s evaluation raised, or a sink refused its result: it is never
        confirmed. Its revision stays held as a closed one is, for the ``keep`` most recent
        (at least `MIN_FAILED`: a sink may have taken verdicts under it)."""
        if self.record is None:
            return
        key = session.key
        if self._in_flight.get(key) == session.revision:
            del self._in_flight[key]
        failed = self._failed
        failed[key] = max(session.revision, failed.pop(key, 0))
        while len(failed) > max(self.keep, MIN_FAILED):
            failed.popitem(last=False)

    def take_evaluated(self) -> list[Evaluated]:
        """Sessions evaluated since the last call, for the owner to confirm."""
        done, self._evaluated = self._evaluated, []
        return done

    def confirm(self, done: Sequence[Completion]) -> None:
        """The verdicts of ``done`` were delivered: the record confirms them (raising, and
        holding on to them, if it cannot) and the ledger no longer needs to."""
        if self.record is None:
            return
        self.record.complete(done)
        in_flight = self._in_flight
        for item in done:
            if in_flight.get(item.key) == item.revision:
                del in_flight[item.key]
