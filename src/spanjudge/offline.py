"""Offline evaluation of recorded OTLP files (`spanjudge eval`), streamed in bounded memory."""

from __future__ import annotations

import gc
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from spanjudge.emit.summary import Summary
from spanjudge.engine import Engine
from spanjudge.errors import InputError
from spanjudge.pipeline import EventClock, Pipeline, collect_less
from spanjudge.semconv import (
    LOG_UNREAD_NO_SPAN_CONTEXT,
    LOG_UNREAD_NOT_CONTENT,
    LOG_UNREAD_SPAN_NOT_SEEN,
)
from spanjudge.sessions.store import SessionStore
from spanjudge.spans.files import expand_inputs, read_input
from spanjudge.values import SessionResult

if TYPE_CHECKING:

    class ReportWriter(Protocol):
        def begin(self) -> None: ...
        def session(self, result: SessionResult) -> None: ...
        def end(self, summary: Summary, input_report: dict[str, Any]) -> None: ...


_UNREAD_WHY = {
    LOG_UNREAD_NO_SPAN_CONTEXT: "with no trace and span id (no span to join them to)",
    LOG_UNREAD_NOT_CONTENT: "plain log line(s) (no event name, no GenAI message body)",
    LOG_UNREAD_SPAN_NOT_SEEN: "naming a span that is not in the input",
}
_gc_lock = threading.Lock()
_gc_runs = 0  # runs under way, in any thread
_gc_found = (0, 0, 0)  # the thresholds the first of them found; the last one puts them back


@dataclass(slots=True)
class InputStats:
    files: int = 0
    lines: int = 0
    spans: int = 0
    bytes: int = 0
    skipped: int = 0
    duplicate_spans: int = 0  # spans whose (trace id, span id) was seen before: first copy kept
    log_records: int = 0  # read from logs documents, as content of their spans
    log_records_unread: dict[str, int] = field(default_factory=dict)  # reason -> count
    problems: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "lines": self.lines,
            "spans": self.spans,
            "skipped": self.skipped,
            "duplicate_spans": self.duplicate_spans,
            "log_records": self.log_records,
            "log_records_unread": dict(self.log_records_unread),
            "problems": self.problems[:100],
        }


class Progress:
    """A one-line progress indicator on stderr, only when stderr is a terminal."""

    def __init__(self, enabled: bool, total_bytes: int | None = None) -> None:
        self.enabled = enabled
        self.total_bytes = total_bytes  # known for plain files: then a percentage is shown
        self.last = 0.0
        self.started = time.monotonic()

    def update(self, stats: InputStats, sessions: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.last < 0.5:
            return
        self.last = now
        rate = stats.spans / max(1e-9, now - self.started)
        done = ""
        if self.total_bytes:
            done = f"{min(100.0, 100 * stats.bytes / self.total_bytes):.0f}% "
        sys.stderr.write(
            f"\r{done}{stats.spans:,} spans, {sessions:,} sessions evaluated, "
            f"{stats.bytes / 1e6:,.0f} MB read, {rate:,.0f} spans/s "
        )
        sys.stderr.flush()

    def done(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")


class _ReportSink:
    """The report as a pipeline sink: each evaluated session goes to the summary and the writer."""

    def __init__(self, summary: Summary, writer: ReportWriter) -> None:
        self.summary = summary
        self.writer = writer

    def emit(self, result: SessionResult) -> None:
        self.summary.add(result)
        self.writer.session(result)

    def flush(self, timeout_s: float) -> bool:
        return True

    def shutdown(self) -> None:
        """The writer is closed by `run_offline` (its `end`), with the input statistics."""


def run_offline(
    paths: Sequence[str],
    engine: Engine,
    writer: ReportWriter,
    *,
    skip_invalid: bool = False,
    progress: bool = False,
    on_skip: Callable[[str], None] | None = None,
    total_bytes: int | None = None,
) -> tuple[Summary, InputStats]:
    """Stream every input through the same `Pipeline` as the online front ends; sessions are
    evaluated as soon as their close policy fires on event time, the rest at end of input.

    Raises `InputError` on the first bad line unless ``skip_invalid``."""
    # Collection is made rarer while spans wait for their sessions (`pipeline.collect_less`).
    # The thresholds are the process's: runs overlapping in threads raise them once, and the
    # last one to end (whichever it is) puts back what the first one found.
    global _gc_runs, _gc_found
    with _gc_lock:
        if not _gc_runs:
            _gc_found = collect_less()
        _gc_runs += 1
    try:
        files = expand_inputs(paths)
        return _run(files, engine, writer, skip_invalid, progress, on_skip, total_bytes)
    finally:
        with _gc_lock:
            _gc_runs -= 1
            if not _gc_runs:
                gc.set_threshold(*_gc_found)


def _run(
    paths: Sequence[str],
    engine: Engine,
    writer: ReportWriter,
    skip_invalid: bool,
    progress: bool,
    on_skip: Callable[[str], None] | None,
    total_bytes: int | None,
) -> tuple[Summary, InputStats]:
    clock = EventClock()
    # Memory bounded by open sessions: closed sessions keep only their revision number, so a
    # late span in the file re-opens its session as the next, partial (incomplete) revision.
    # Turns close one by one only when asked: the whole input is here to evaluate at its end.
    policy = replace(
        engine.config.policy, keep_closed_sessions=0, per_turn=bool(engine.config.policy.per_turn)
    )
    summary = Summary()
    pipeline = Pipeline(
        engine,
        SessionStore(policy, clock=clock),
        [_ReportSink(summary, writer)],
        raise_errors=True,
        event_clock=clock,
        # Judgments overlap across sessions; the report keeps the order sessions closed in.
        ordered=True,
    )
    stats = InputStats()
    bar = Progress(progress, total_bytes)
    writer.begin()

    def skip(error: InputError) -> None:
        stats.skipped += 1
        stats.problems.append(str(error))
        if on_skip:
            on_skip(str(error))

    for path in paths:
        stats.files += 1
        for chunk in read_input(path, engine.config.limits, skip if skip_invalid else None):
            stats.lines += 1
            stats.bytes += chunk.size_bytes
            for problem in chunk.problems:
                error = InputError(str(problem), file=chunk.source, line=chunk.line)
                if not skip_invalid:
                    raise error
                skip(error)
            pipeline.add(chunk.spans, chunk.sizes)
            carried = chunk.log_records
            stats.log_records += carried
            stats.spans += len(chunk.spans) - carried
            for reason, count in (chunk.unread or {}).items():
                stats.log_records_unread[reason] = stats.log_records_unread.get(reason, 0) + count
            pipeline.tick()
            bar.update(stats, summary.sessions)
    pipeline.close_all("end_of_input")
    store = pipeline.store
    if store.duplicates:
        stats.duplicate_spans = store.duplicates
        stats.problems.append(
            f"{store.duplicates} span(s) repeated a trace id + span id already read in their "
            "session; the first copy of each was kept (the input holds the same spans twice?)"
        )
    unseen = pipeline.log_records_unjoined
    if unseen:
        stats.log_records_unread[LOG_UNREAD_SPAN_NOT_SEEN] = unseen
    if stats.log_records_unread:
        stats.problems.append(
            "log record(s) not read as content: "
            + ", ".join(
                f"{count} {_UNREAD_WHY[reason]}"
                for reason, count in sorted(stats.log_records_unread.items())
            )
        )
    bar.done()
    writer.end(summary, stats.to_json())
    return summary, stats
