"""The durable spool: request bodies of open sessions in SQLite (WAL), written before the ack.

A request is stored once, as received (decompressed), with one membership row per span group it
carries: ``s:<session key>`` for spans with a session key, ``t:<trace id>`` for spans without one.
When a session has been evaluated and its verdicts were accepted by every sink, one transaction
removes its memberships (only rows the pipeline had already consumed), deletes requests left with
no membership, and records the session's revision as evaluated. A restart replays what is left.

SQLite recovers silently: a lost or damaged write-ahead log simply yields fewer rows. So the number
of acknowledged requests not yet evaluated is also kept outside SQLite, in ``<path>-acked``, as
durable as the acknowledgement itself; a restart compares it with what SQLite gives back.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from spanjudge.sessions.keys import session_key
from spanjudge.sessions.revisions import Completion
from spanjudge.spans.otlp_proto import SpanHead
from spanjudge.spans.record import SpanRecord

_SCHEMA = """
CREATE TABLE IF NOT EXISTS requests (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    format TEXT NOT NULL,
    size INTEGER NOT NULL,
    body BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS members (
    request_id INTEGER NOT NULL,
    gkey TEXT NOT NULL,
    PRIMARY KEY (gkey, request_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS members_request ON members (request_id);
CREATE TABLE IF NOT EXISTS evaluated (
    skey TEXT PRIMARY KEY,
    revision INTEGER NOT NULL,
    at REAL NOT NULL
);
"""


ACKED_SUFFIX = "-acked"
# Groups released by one statement: well under SQLite's limit on a statement's parameters.
_GROUPS_PER_STATEMENT = 500
# Fixed width, written in place at offset 0: one small write, never a truncated or partial file.
_ACKED_WIDTH = 20


def read_acknowledged(path: str) -> int | None:
    """The count of acknowledged, unfinished requests the spool at ``path`` last recorded; None
    when there is no record (a new spool, or one from a version that kept none) or it is not a
    number."""
    try:
        with open(path + ACKED_SUFFIX, "rb") as handle:
            text = handle.read(_ACKED_WIDTH + 1)
    except OSError:
        return None
    try:
        value = int(text.strip() or b"x")
    except ValueError:
        return None
    return value if value >= 0 else None


def _forget_oldest(db: sqlite3.Connection, rows: int) -> list[str]:
    """Forget the ``rows`` revisions evaluated longest ago: a sort of those few, not of the
    whole table. Returns their keys."""
    return [
        key
        for (key,) in db.execute(
            "DELETE FROM evaluated WHERE skey IN"
            " (SELECT skey FROM evaluated ORDER BY at LIMIT ?) RETURNING skey",
            (rows,),
        )
    ]


class StorageError(Exception):
    """The spool cannot write now (disk full, I/O error, locked): a fault that may pass, so the
    caller answers with a retryable status. The message is SQLite's own."""


def _rollback(db: sqlite3.Connection) -> None:
    # SQLite rolls some failures back itself (SQLITE_FULL during COMMIT does): a second ROLLBACK
    # would raise "no transaction is active" and hide the real cause.
    if db.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            db.execute("ROLLBACK")


def group_of(span: SpanRecord | SpanHead, key_attributes: Sequence[str] = ()) -> str:
    """The spool group of a span: its session key, else its trace (keyless spans wait there)."""
    return group_for(session_key(span, key_attributes), span.trace_id)


def group_for(found: tuple[str, str] | None, trace_id: str) -> str:
    """`group_of` a span of ``trace_id`` whose `session_key` is ``found``."""
    return "s:" + found[0] if found is not None else "t:" + trace_id


@dataclass(frozen=True, slots=True)
class Stored:
    """One spooled request, for replay: only spans of ``groups`` are still owed an evaluation."""

    request_id: int
    format: str
    body: bytes
    groups: frozenset[str]


class Spool:
    """SQLite spool. Thread-safe: every call holds one lock around one connection. It is the
    record of a sidecar's revision ledger (`sessions.revisions.Revisions`)."""

    def __init__(
        self,
        path: str,
        *,
        max_bytes: int,
        synchronous: str = "normal",
        keep_evaluated: int = 100_000,
    ) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.keep_evaluated = keep_evaluated
        self._lock = threading.Lock()
        # What an acknowledgement survives. In WAL mode a commit is in the log before it returns:
        # NORMAL survives a killed process (the operating system still writes the log out) but
        # not a power loss or a kernel crash; FULL syncs the log, and the count, at every commit.
        self._sync = synchronous == "full"
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._acked = -1
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(f"PRAGMA synchronous={'FULL' if self._sync else 'NORMAL'}")
            self._db.executescript(_SCHEMA)
            # A damaged page otherwise surfaces later, mid-replay or mid-request.
            # (integrity_check, not quick_check: SQLite 3.40 quick_check misreads WITHOUT ROWID)
            check = [r[0] for r in self._db.execute("PRAGMA integrity_check(5)").fetchall()]
            if check != ["ok"]:
                raise sqlite3.DatabaseError("integrity check failed: " + "; ".join(check))
            row = self._db.execute(
                "SELECT COALESCE(SUM(size), 0), COUNT(*) FROM requests"
            ).fetchone()
            evaluated = self._db.execute("SELECT COUNT(*) FROM evaluated").fetchone()[0]
            if evaluated > keep_evaluated:
                # Pruned at open too: a sidecar restarted more often than every thousand
                # completions (where `complete` looks) would otherwise grow it for ever.
                _forget_oldest(self._db, evaluated - keep_evaluated)
                evaluated = keep_evaluated
            self._acked = os.open(path + ACKED_SUFFIX, os.O_RDWR | os.O_CREAT, 0o600)
            self._record(row[1])  # from here on the record is this spool's
        except BaseException:
            self._db.close()  # not a usable spool (not a database, read-only, ...)
            if self._acked >= 0:
                os.close(self._acked)
            raise
        self.bytes: int = row[0]
        self.requests: int = row[1]
        self._completions = 0
        # The `evaluated` table as a dict, read on the first `revision` and kept up to date by
        # `complete` (no query per session opened); None until then (a serve process whose
        # evaluation processes read the file never asks).
        self._evaluated: dict[str, int] | None = None
        # At least the rows of `evaluated` (a completion adds at most one): while it is not
        # above `keep_evaluated`, nothing needs pruning and the pruning query (a sort of the
        # whole table) is not run.
        self._evaluated_bound: int = evaluated

    def _record(self, requests: int) -> None:
        """Write the count of acknowledged, unfinished requests outside SQLite (OSError on
        failure). It must never exceed what SQLite holds when intact: raised only after the
        commit that stores a request, lowered before the commit that forgets some."""
        os.pwrite(self._acked, b"%*d\n" % (_ACKED_WIDTH, requests), 0)
        if self._sync:
            os.fsync(self._acked)

    def room_for(self, size: int) -> bool:
        """Whether a request of ``size`` bytes fits; an empty spool always takes one request."""
        return self.requests == 0 or self.bytes + size <= self.max_bytes

    def append(self, body: bytes, fmt: str, groups: Iterable[str]) -> int:
        """Store one request durably (committed on return); returns its id."""
        with self._lock:
            db = self._db
            try:
                db.execute("BEGIN IMMEDIATE")
                cursor = db.execute(
                    "INSERT INTO requests (format, size, body) VALUES (?, ?, ?)",
                    (fmt, len(body), body),
                )
                request_id = cursor.lastrowid
                assert request_id is not None
                db.executemany(
                    "INSERT OR IGNORE INTO members (request_id, gkey) VALUES (?, ?)",
                    [(request_id, g) for g in groups],
                )
                db.execute("COMMIT")
            except sqlite3.Error as exc:
                _rollback(db)
                raise StorageError(str(exc)) from exc
            except BaseException:
                _rollback(db)
                raise
            self.bytes += len(body)
            self.requests += 1
            try:
                self._record(self.requests)
            except OSError as exc:
                # Not acknowledged then: the client sends it again, and the stored copy is one
                # more request to evaluate, never one the restart would miss.
                raise StorageError(f"cannot record the count of spooled requests: {exc}") from exc
            return request_id

    def replay(self) -> Iterator[Stored]:
        """Requests still owed an evaluation, oldest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT r.id, r.format, r.body, GROUP_CONCAT(m.gkey, char(31)) "
                "FROM requests r JOIN members m ON m.request_id = r.id "
                "GROUP BY r.id ORDER BY r.id"
            ).fetchall()
        for request_id, fmt, body, groups in rows:
            yield Stored(request_id, fmt, bytes(body), frozenset(groups.split("\x1f")))

    def last_request_id(self) -> int:
        with self._lock:
            row = self._db.execute("SELECT COALESCE(MAX(id), 0) FROM requests").fetchone()
        return int(row[0])

    def complete(self, done: Sequence[Completion]) -> None:
        """Forget the spans of evaluated sessions and record their revisions, atomically."""
        if not done:
            return
        with self._lock:
            db = self._db
            lowered = False
            try:
                db.execute("BEGIN IMMEDIATE")
                # A statement per batch of groups released up to the same request (a batch of
                # completions usually shares one mark), not one per group: the per-statement
                # cost is most of the work.
                by_upto: dict[int, list[str]] = {}
                for item in done:
                    by_upto.setdefault(item.upto, []).extend(item.groups)
                touched: set[int] = set()
                for upto, groups in by_upto.items():
                    for start in range(0, len(groups), _GROUPS_PER_STATEMENT):
                        chunk = groups[start : start + _GROUPS_PER_STATEMENT]
                        among = ",".join("?" * len(chunk))
                        touched.update(
                            r
                            for (r,) in db.execute(
                                "SELECT DISTINCT request_id FROM members"
                                f" WHERE request_id <= ? AND gkey IN ({among})",
                                (upto, *chunk),
                            )
                        )
                        db.execute(
                            f"DELETE FROM members WHERE request_id <= ? AND gkey IN ({among})",
                            (upto, *chunk),
                        )
                db.executemany(
                    "INSERT INTO evaluated (skey, revision, at) VALUES (?, ?, ?) "
                    "ON CONFLICT (skey) DO UPDATE SET"
                    " revision = MAX(revision, excluded.revision), at = excluded.at",
                    [(item.key, item.revision, time.time()) for item in done],
                )
                freed = 0
                gone = 0
                for request_id in touched:
                    if db.execute(
                        "SELECT 1 FROM members WHERE request_id = ? LIMIT 1", (request_id,)
                    ).fetchone():
                        continue
                    row = db.execute(
                        "DELETE FROM requests WHERE id = ? RETURNING size", (request_id,)
                    ).fetchone()
                    if row is not None:
                        freed += row[0]
                        gone += 1
                self._completions += len(done)
                bound = self._evaluated_bound + len(done)
                forgotten: list[str] = []
                if self._completions >= 1000:
                    self._completions = 0
                    if bound > self.keep_evaluated:
                        bound = db.execute("SELECT COUNT(*) FROM evaluated").fetchone()[0]
                    if bound > self.keep_evaluated:
                        forgotten = _forget_oldest(db, bound - self.keep_evaluated)
                        bound = self.keep_evaluated
                if gone:
                    self._record(self.requests - gone)
                    lowered = True
                db.execute("COMMIT")
            except (sqlite3.Error, OSError) as exc:
                _rollback(db)
                if lowered:  # the requests are still stored: so says the record again
                    with contextlib.suppress(OSError):
                        self._record(self.requests)
                raise StorageError(str(exc)) from exc
            except BaseException:
                _rollback(db)
                raise
            self.bytes -= freed
            self.requests -= gone
            self._evaluated_bound = bound
            evaluated = self._evaluated
            if evaluated is not None:  # what the table now holds, in the statements' order
                for item in done:
                    if item.revision > evaluated.get(item.key, 0):
                        evaluated[item.key] = item.revision
                for key in forgotten:
                    evaluated.pop(key, None)

    def revision(self, key: str) -> int:
        """The last revision of ``key`` recorded as evaluated (0: never)."""
        with self._lock:
            evaluated = self._evaluated
            if evaluated is None:
                evaluated = self._evaluated = {
                    skey: int(revision)
                    for skey, revision in self._db.execute("SELECT skey, revision FROM evaluated")
                }
            return evaluated.get(key, 0)

    def close(self) -> None:
        with self._lock:
            self._db.close()
            os.close(self._acked)


def remember_revisions(
    revisions: OrderedDict[str, int], done: Sequence[Completion], keep: int
) -> None:
    """Record the highest revision evaluated per session key, keeping the ``keep`` most recent
    keys (the caller holds its lock)."""
    for item in done:
        revisions[item.key] = max(item.revision, revisions.get(item.key, 0))
        revisions.move_to_end(item.key)
    while len(revisions) > keep:
        revisions.popitem(last=False)


class MemorySpool:
    """The spool switched off: nothing durable; revisions kept for a bounded number of keys."""

    def __init__(self, keep_evaluated: int = 100_000) -> None:
        self.bytes = 0
        self.requests = 0
        self.max_bytes = 0
        self._next = 0
        self._lock = threading.Lock()
        self._revisions: OrderedDict[str, int] = OrderedDict()
        self._keep = keep_evaluated

    def room_for(self, size: int) -> bool:
        return True

    def append(self, body: bytes, fmt: str, groups: Iterable[str]) -> int:
        with self._lock:
            self._next += 1
            return self._next

    def replay(self) -> Iterator[Stored]:
        return iter(())

    def last_request_id(self) -> int:
        return self._next

    def complete(self, done: Sequence[Completion]) -> None:
        with self._lock:
            remember_revisions(self._revisions, done, self._keep)

    def revision(self, key: str) -> int:
        with self._lock:
            return self._revisions.get(key, 0)

    def close(self) -> None:
        return None
