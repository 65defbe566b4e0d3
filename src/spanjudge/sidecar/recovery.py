"""What a spool left on disk says before SQLite opens it, and moving an unusable one aside.

SQLite recovers a spool by itself and silently: it replays the write-ahead log up to its last
whole commit, turns an empty file into a new database and ignores a log whose database is gone.
The operator is told here what that means for the spans in it: the count of acknowledged,
unfinished requests the spool keeps outside SQLite (`spool.read_acknowledged`) against what came
back, and SQLite's integrity check. A spool SQLite cannot read at all is moved aside on request
(`serve.spool.recreate`, after the Collector's `file_storage`).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import struct
import time
from dataclasses import dataclass

from spanjudge.errors import ConfigError
from spanjudge.sidecar.config import ServeConfig, spool_path_problem
from spanjudge.sidecar.spool import ACKED_SUFFIX, MemorySpool, Spool, read_acknowledged

log = logging.getLogger("spanjudge.sidecar")

_WAL_HEADER_BYTES = 32
_FRAME_HEADER_BYTES = 24
_WAL_MAGIC = (0x377F0682, 0x377F0683)
SIDE_FILES = ("-wal", "-shm")


@dataclass(frozen=True, slots=True, kw_only=True)
class DiskState:
    """The spool's files before opening: notes for the operator, and whether one was there."""

    notes: tuple[str, ...]
    existed: bool


def _size(path: str) -> int | None:
    try:
        return os.path.getsize(path)
    except OSError:
        return None


def _torn_bytes(wal: str, size: int) -> int:
    """Bytes of a partly written last frame at the end of the write-ahead log (0: none)."""
    try:
        with open(wal, "rb") as handle:
            header = handle.read(_WAL_HEADER_BYTES)
    except OSError:
        return 0
    if len(header) < _WAL_HEADER_BYTES:
        return size
    magic, _version, page_size = struct.unpack(">III", header[:12])
    magic, page_size = int(magic), int(page_size)
    if magic not in _WAL_MAGIC or page_size < 512:
        return 0  # not a log SQLite wrote: it ignores it, and so do we
    return (size - _WAL_HEADER_BYTES) % (page_size + _FRAME_HEADER_BYTES)


def inspect(path: str) -> DiskState:
    """Look at the spool's files without opening them; an orphaned log is moved aside (SQLite
    would otherwise apply another database's pages to a new file)."""
    notes: list[str] = []
    db_size = _size(path)
    wal = path + "-wal"
    wal_size = _size(wal) or 0
    if db_size is None:
        if wal_size:
            moved = aside(path, only=SIDE_FILES)
            notes.append(
                f"the spool {path!r} is missing but its write-ahead log ({wal_size} bytes) is"
                f" there: the file was deleted or moved while spanjudge ran. The spans in it are"
                f" lost; the log was moved to {moved!r}; starting an empty spool"
            )
        return DiskState(notes=tuple(notes), existed=False)
    if db_size == 0:
        # SQLite cannot rebuild a database from a log whose frames assume pages the file held:
        # what it gives back, if anything, is counted once the spool is open.
        what = (
            f"; its write-ahead log ({wal_size} bytes) alone cannot restore what had been"
            " checkpointed into the file"
            if wal_size
            else "; nothing in it to recover, starting an empty spool"
        )
        notes.append(f"the spool {path!r} is empty (0 bytes): it was truncated or replaced{what}")
    if wal_size:
        torn = _torn_bytes(wal, wal_size)
        if torn:
            notes.append(
                f"the spool's write-ahead log {wal!r} ends in a partly written frame ({torn}"
                " bytes): the process or the machine stopped while writing. Every request"
                " committed before it is recovered; the unfinished one is dropped by SQLite"
                " (an acknowledged request is only ever in it after a power loss with"
                " spool.synchronous: normal)"
            )
    return DiskState(notes=tuple(notes), existed=True)


def aside(path: str, *, only: tuple[str, ...] = ("", *SIDE_FILES, ACKED_SUFFIX)) -> str:
    """Rename the spool's files (``only`` the given suffixes) to ``<path>.corrupt-<UTC time>``;
    returns the new name of the first one moved. Nothing is deleted."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target = f"{path}.corrupt-{stamp}"
    first = ""
    for suffix in only:
        if os.path.exists(path + suffix):
            os.replace(path + suffix, target + suffix)
            first = first or target + suffix
    return first


def open_spool(serve: ServeConfig, source: str | None) -> Spool | MemorySpool:
    """The configured spool, opened; damage found on the way is logged in words, a damaged spool
    is moved aside when `recreate` is on, anything else is a `ConfigError` with the fix."""
    config = serve.spool
    if not config.enabled:
        return MemorySpool(config.keep_evaluated)
    # Read before anything moves or opens the spool: opening it starts a new record.
    acknowledged = read_acknowledged(config.path)
    problem = spool_path_problem(config.path)
    if problem is not None and config.recreate and os.path.isfile(config.path):
        _move_aside(config.path, "it is not a SQLite database")
        problem = spool_path_problem(config.path)
    if problem is not None:  # a clearer message than SQLite's, and nothing created on the way
        raise ConfigError(f"serve.spool.path: {problem}", source=source)
    state = inspect(config.path)
    for note in state.notes:
        log.warning("%s", note)
    try:
        spool = _spool(serve)
    except sqlite3.OperationalError as exc:  # permissions, a read-only disk, a lock: not damage
        raise ConfigError(_unusable(config.path, exc), source=source) from None
    except sqlite3.DatabaseError as exc:
        if not config.recreate:
            problem = (
                f"serve.spool.path: the spool {config.path!r} is damaged ({exc}); set"
                " serve.spool.recreate: true to move it aside and start with an empty spool,"
                " or move the file away yourself"
            )
            raise ConfigError(problem, source=source) from None
        _move_aside(config.path, f"SQLite cannot read it: {exc}")
        try:
            spool = _spool(serve)
        except sqlite3.Error as again:
            raise ConfigError(_unusable(config.path, again), source=source) from None
    except OSError as exc:
        raise ConfigError(_unusable(config.path, exc), source=source) from None
    if acknowledged is not None and acknowledged > spool.requests:
        log.warning(
            "spool %s: %d acknowledged request(s) did not come back: %d were stored and not yet"
            " evaluated when spanjudge stopped, %d recovered. The spans of the missing ones are"
            " lost and get no verdict (the spool was damaged, deleted or replaced while"
            " spanjudge was down%s)",
            config.path,
            acknowledged - spool.requests,
            acknowledged,
            spool.requests,
            "" if config.synchronous == "full" else ", or the machine lost power",
        )
    if spool.requests:
        log.info(
            "spool %s: recovered %d request(s) (%d bytes) still owed an evaluation",
            config.path,
            spool.requests,
            spool.bytes,
        )
    elif not state.existed:
        # A first start: the start-up line names the spool already; one line is the promise.
        log.debug("spool %s: none was there, starting a new one", config.path)
    return spool


def _spool(serve: ServeConfig) -> Spool:
    config = serve.spool
    return Spool(
        config.path,
        max_bytes=config.max_bytes,
        synchronous=config.synchronous,
        keep_evaluated=config.keep_evaluated,
    )


def _unusable(path: str, exc: BaseException) -> str:
    return (
        f"serve.spool.path: cannot open the spool {path!r}: {exc}; point it at a"
        " SQLite file in a writable directory (or move the file away)"
    )


def _move_aside(path: str, why: str) -> None:
    size = os.path.getsize(path)
    moved = aside(path)
    log.warning(
        "serve.spool.recreate: moved the spool %s (%d bytes; %s) to %s; the spans in it are not"
        " evaluated; starting with an empty spool",
        path,
        size,
        why,
        moved,
    )
