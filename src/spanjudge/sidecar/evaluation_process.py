"""One evaluation process of `serve.workers` > 1: the child side.

The parent (`sidecar.shards`) routes each span to the process that owns its session and sends
it here with the spool id of its request: a protobuf span as the bytes it arrived in, decoded
here (`records_of`), any other span decoded. This process runs the same `Worker` loop as the
single-process sidecar (store, engine, ticks, shutdown modes), but its "sinks" and "spool" are
the pipe back to the parent: what the parent's metrics sink and summary line record of the
results goes back tallied (`emit.metrics.MetricsTally`), and completions (with the mark of the
last request this process had taken when the session closed) go back to be confirmed in the
one spool once the parent's sinks accepted them. Nothing here writes the spool: the worker's
revision ledger reads the revisions recorded there (of the session keys a request's spans carry,
in one query per request) and confirms through the pipe.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import signal
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, NamedTuple, cast

from opentelemetry import metrics
from opentelemetry.sdk.resources import Resource

from spanjudge.config import Config
from spanjudge.emit.metrics import MetricsTally, SelfTelemetry
from spanjudge.engine import Engine
from spanjudge.pipeline import collect_less
from spanjudge.sessions.revisions import Completion
from spanjudge.sidecar.asking_store import Asker, AskingStore
from spanjudge.sidecar.config import ExportConfig, InputConfig
from spanjudge.sidecar.export import VerdictExport, build_verdict_export, report_unflushed
from spanjudge.sidecar.export_health import export_health
from spanjudge.sidecar.relay_metrics import RelayMeterProvider
from spanjudge.sidecar.routing import Routable
from spanjudge.sidecar.signals import STOP_SIGNALS
from spanjudge.sidecar.spool import Stored, remember_revisions
from spanjudge.sidecar.summary_log import Judged, log_judged, open_in
from spanjudge.sidecar.worker import Worker
from spanjudge.spans.limits import Limits
from spanjudge.spans.otlp_proto import SpanHead, decode_request, parse_request, wire_request
from spanjudge.spans.record import SpanRecord
from spanjudge.spans.sizes import estimate_size
from spanjudge.values import SessionResult

log = logging.getLogger("spanjudge.sidecar")
# How often the process says it is alive, from its main thread (the one reading the pipe), even
# while its worker thread is busy: the parent replaces one that stays silent.
HEARTBEAT_S = 0.5
# Session keys per query of the spool's `evaluated` table (SQLite's bound on a statement's
# parameters is 999 before 3.32)
_KEYS_PER_QUERY = 500


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcessSettings:
    """What an evaluation process needs to build its worker (sent once, at spawn)."""

    index: int
    config: Config
    export: ExportConfig
    resource: dict[str, Any]  # the serve process's resource: verdicts carry its identity
    checks: InputConfig
    spool_path: str | None  # None: the spool is off (revisions only in memory)
    keep_evaluated: int
    tick_interval_s: float
    log_level: int


class _Channel:
    """The pipe to the parent; any thread may send."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.lock = threading.Lock()

    def send(self, message: tuple[Any, ...]) -> None:
        with self.lock:
            self.conn.send(message)


class _Telemetry(SelfTelemetry):
    """Self-telemetry recorded here and handed to the parent's instruments with each message."""

    def __init__(self) -> None:
        super().__init__(None)
        # (what, label) or, for dropped verdicts, (what, signal, reason)
        self._counts: collections.Counter[tuple[str, ...]] = collections.Counter()
        self._durations: list[float] = []
        self._lock = threading.Lock()

    def set_open_sessions_callback(self, fn: Callable[[], int]) -> None:
        self._open_fn = fn

    def open_sessions(self) -> int:
        fn = self._open_fn
        return fn() if fn is not None else 0

    def _count(self, what: str, label: str, n: int = 1) -> None:
        with self._lock:
            self._counts[(what, label)] += n

    def spans_received(self, n: int) -> None:
        if n:
            self._count("received", "", n)

    def spans_dropped(self, n: int, reason: str) -> None:
        if n:
            self._count("dropped", reason, n)

    def verdicts_dropped(self, n: int, signal: str, reason: str) -> None:
        # zero too: it creates the series in serve (`SelfTelemetry.verdicts_dropped`)
        with self._lock:
            self._counts[("verdicts_dropped", signal, reason)] += n

    def evaluation_duration(self, seconds: float) -> None:
        with self._lock:
            self._durations.append(seconds)

    def session_closed(self, state: str) -> None:
        self._count("closed", state)

    def non_agent_trace(self) -> None:
        self._count("non_agent", "")

    def internal_error(self, where: str) -> None:
        self._count("internal", where)

    def session_keys_refused(self, n: int) -> None:
        if n:
            self._count("keys_refused", "", n)

    def take(self) -> tuple[dict[tuple[str, ...], int], list[float]]:
        with self._lock:
            counts, self._counts = dict(self._counts), collections.Counter()
            durations, self._durations = self._durations, []
        return counts, durations


# One request's part as it crosses to an evaluation process, in the request's order: decoded
# records, and runs of protobuf spans in wire form that share a resource and a scope
# ((resource, scope, spans), as `spans.otlp_proto.WireSpan` holds them).
Payload = list[SpanRecord | tuple[bytes, bytes, list[bytes]]]


class Part(NamedTuple):
    """One request's part for one evaluation process, as the serve process routed it."""

    request_id: int  # its spool id
    spans: Payload
    released: list[str]  # key-less traces this process gives up (their key went elsewhere)
    resent: int  # spans among ``spans`` sent a second time (counted when they first came)
    sizes: list[int] | None  # each record's `estimate_size`, when known
    span_count: int  # how many spans
    keys: list[str]  # the session keys its spans carry, each once


def payload(records: Sequence[Routable]) -> Payload:
    """``records`` as they cross to an evaluation process: a `SpanHead` as its wire bytes."""
    out: Payload = []
    run: list[bytes] = []
    resource = scope = b""
    for record in records:
        if isinstance(record, SpanHead):
            span_resource, span_scope, span = record.wire
            if run and span_resource == resource and span_scope == scope:
                run.append(span)
            else:
                run = [span]
                resource, scope = span_resource, span_scope
                out.append((resource, scope, run))
        else:
            run = []
            out.append(record)
    return out


def records_of(sent: Payload, limits: Limits, sizes: list[int] | None = None) -> list[SpanRecord]:
    """The records of a payload in order, its wire runs decoded as the serve process would
    have decoded their request (`decode_request`). With ``sizes``, each record's
    `estimate_size` is appended to it, in order (the decoder works it out as it reads)."""
    records: list[SpanRecord] = []
    runs: list[tuple[bytes, bytes, list[bytes]]] = []
    for item in sent:
        if isinstance(item, tuple):
            runs.append(item)
            continue
        if runs:
            records.extend(_decoded(runs, limits, sizes))
            runs = []
        records.append(item)
        if sizes is not None:
            sizes.append(estimate_size(item))
    if runs:
        records.extend(_decoded(runs, limits, sizes))
    return records


def _decoded(
    runs: list[tuple[bytes, bytes, list[bytes]]], limits: Limits, sizes: list[int] | None
) -> list[SpanRecord]:
    records, problems = decode_request(parse_request(wire_request(runs)), limits, sizes)
    if problems:  # the serve process checked them as `decode_request` does: a bug
        log.error("spans the serve process accepted do not decode: %s", problems[:3])
    return records


def replay_telemetry(
    telemetry: SelfTelemetry, counts: dict[tuple[str, ...], int], durations: list[float]
) -> None:
    """Record in the parent what an evaluation process counted since its last message."""
    for key, n in counts.items():
        what, label = key[0], key[1]
        if what == "verdicts_dropped":
            telemetry.verdicts_dropped(n, label, key[2])
        elif what == "received":
            telemetry.spans_received(n)
        elif what == "dropped":
            telemetry.spans_dropped(n, label)
        elif what == "non_agent":
            for _ in range(n):
                telemetry.non_agent_trace()
        elif what == "keys_refused":
            telemetry.session_keys_refused(n)
        else:
            for _ in range(n):
                if what == "closed":
                    telemetry.session_closed(label)
                else:
                    telemetry.internal_error(label)
    for seconds in durations:
        telemetry.evaluation_duration(seconds)


class _ForwardSink:
    """What serve's own sinks (its metrics and its summary line) record of the results here,
    tallied per series and sent when the worker flushes (after the export), with the sessions
    it covers: serve records a message in one step per series, not per session."""

    def __init__(self, channel: _Channel) -> None:
        self.channel = channel
        self._sessions: list[tuple[str, int]] = []
        self._metrics = MetricsTally()
        self._judged = Judged()

    def emit(self, result: SessionResult) -> None:
        trajectory = result.trajectory
        self._sessions.append((trajectory.session_id, trajectory.revision))
        self._metrics.add(result)
        self._judged.add(result)
        log_judged(result)

    def flush(self, timeout_s: float) -> bool:
        if self._sessions:
            message = ("results", self._sessions, self._metrics, self._judged)
            self._sessions, self._metrics, self._judged = [], MetricsTally(), Judged()
            self.channel.send(message)
        return True

    def shutdown(self) -> None:
        return None


class _PipeSpool:
    """The spool over the pipe: revisions read from its file, completions sent (and kept)."""

    def __init__(self, channel: _Channel, path: str | None, keep: int) -> None:
        self.bytes = self.max_bytes = self.requests = 0
        self.channel = channel
        self._db: sqlite3.Connection | None = None
        if path is not None:
            self._db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
        self._revisions: collections.OrderedDict[str, int] = collections.OrderedDict()
        self._keep = keep
        self._lock = threading.Lock()
        # While a request's spans are added: the revision the file holds of each session key
        # they carry, read in one query (`look_up`) instead of one per session opened.
        self._recorded: dict[str, int] = {}

    def room_for(self, size: int) -> bool:
        return True

    def append(self, body: bytes, fmt: str, groups: Iterable[str]) -> int:
        raise RuntimeError("an evaluation process does not spool requests")

    def replay(self) -> Iterator[Stored]:
        return iter(())

    def last_request_id(self) -> int:
        return 0

    def complete(self, done: Sequence[Completion]) -> None:
        with self._lock:
            remember_revisions(self._revisions, done, self._keep)
        # As plain tuples: a frozen dataclass unpickles through a `__setstate__` that looks up
        # its fields for every instance, several times the cost of building it again there.
        self.channel.send(("done", [(d.key, d.revision, d.groups, d.upto) for d in done]))

    def look_up(self, keys: Sequence[str]) -> None:
        """Read the revisions the file holds of ``keys`` (a request's session keys) for the
        `revision` asked while its spans are added; `forget` after."""
        if self._db is None or not keys:
            return
        recorded = dict.fromkeys(keys, 0)
        with self._lock:
            for start in range(0, len(keys), _KEYS_PER_QUERY):
                chunk = keys[start : start + _KEYS_PER_QUERY]
                marks = ",".join("?" * len(chunk))
                query = f"SELECT skey, revision FROM evaluated WHERE skey IN ({marks})"
                for key, revision in self._db.execute(query, chunk):
                    recorded[key] = int(revision)
            self._recorded = recorded

    def forget(self) -> None:
        with self._lock:
            self._recorded = {}

    def revision(self, key: str) -> int:
        with self._lock:
            known = self._revisions.get(key, 0)
            recorded = self._recorded.get(key)
            if recorded is not None:
                return max(known, recorded)
            if self._db is None:
                return known
            row = self._db.execute(
                "SELECT revision FROM evaluated WHERE skey = ?", (key,)
            ).fetchone()
        return max(known, int(row[0]) if row else 0)

    def close(self) -> None:
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._db.close()


class _ProcessWorker(Worker):
    """The worker loop of one evaluation process: items carry the key-less traces another
    process took over, and each tick tells the parent how far intake got."""

    channel: _Channel
    relay: _Telemetry
    meters: RelayMeterProvider | None = None
    settings: ProcessSettings
    export: VerdictExport | None = None

    def _add(self, item: object) -> int:
        part = cast(Part, item)
        started = time.monotonic()
        sizes = part.sizes
        if sizes is None:  # wire runs: the store's sizes are worked out as they are decoded
            sizes = []
            records = records_of(part.spans, self.limits, sizes)
        else:
            records = records_of(part.spans, self.limits)
        self.lag.busy(time.monotonic() - started)
        if len(records) != part.span_count:
            with self._submit_lock:
                self.pending_spans -= part.span_count - len(records)
        spool = cast(_PipeSpool, self.spool)  # (`run` gives it one)
        spool.look_up(part.keys)
        try:
            added = super()._add((part.request_id, records, sizes, None, 0))
        finally:
            spool.forget()
        if part.resent:  # counted when they first arrived, in the process that released them
            self.relay.spans_received(-part.resent)
        for trace_id in part.released:
            self.pipeline.store.release_pending(trace_id)
        return added

    def enqueue(self, part: Part) -> None:
        """One routed request's part for this process."""
        with self._submit_lock:
            self.pending_spans += part.span_count
            self._queue.put(part)
            self.lag.accepted(part.request_id, part.span_count, time.monotonic())

    def _tick(self) -> None:
        super()._tick()
        self.report()

    def _caught_up(self, upto: int) -> None:
        moved = upto > self.caught_upto
        super()._caught_up(upto)
        if moved:  # serve's backlog, before this batch's export: its backpressure is current
            self.report()

    def report(self) -> None:
        counts, durations = self.relay.take()
        full = self.export is not None and self.export.full
        recorded = self.meters.take() if self.meters is not None else ({}, {})
        self.channel.send(
            (
                "progress",
                # taken through closing (not only added): serve's backlog, its backpressure
                self.caught_upto,
                counts,
                durations,
                self.relay.open_sessions(),
                full,
                recorded,
                self.lag.rate,
                # for serve's summary line: (open sessions, the oldest one's age in s) or None
                open_in(self.pipeline.store),
                self.over_budget,
            )
        )


def run(settings: ProcessSettings, conn: Connection, out: Connection, paused: Any) -> None:
    """The process's entry point (spawned): build the worker, take items until told to stop."""
    # The serve process runs the shutdown (each mode, within its deadline): a SIGTERM or Ctrl-C
    # sent to every process at once (systemd's default KillMode, a terminal's process group)
    # must not end this one midway. It ends when told, or when the serve process is gone.
    # Both were blocked since the spawn (`sidecar.shards`): ignored, one that came is discarded.
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    logging.basicConfig(
        level=settings.log_level,
        format=f"%(asctime)s %(levelname)s %(name)s[worker {settings.index}]: %(message)s",
        stream=sys.stderr,
    )
    collect_less()
    channel = _Channel(out)
    # Judges (and plugins) count on the global meter provider: relayed to the serve process's,
    # as if they had run there. Set before the engine builds the judges.
    meters = RelayMeterProvider()
    metrics.set_meter_provider(meters)
    config = settings.config
    relay = _Telemetry()
    spool = _PipeSpool(channel, settings.spool_path, settings.keep_evaluated)
    export: VerdictExport | None = None
    sinks: list[Any] = []
    if settings.export.enabled:
        # Evaluation spans and log records are encoded and exported here; the parent
        # releases a session once this flush and its own succeeded.
        export = build_verdict_export(
            settings.export,
            Resource.create(settings.resource),
            relay.internal_error,
            relay.verdicts_dropped,
        )
        sinks.append(export.sink())
        # failing / working again: said once, by serve, for every process
        health = export_health(settings.export)
        health.relay = lambda signal, ok, why: channel.send(("health", signal, ok, why))
    worker = _ProcessWorker(
        Engine(config, start_warnings=False),  # serve has said them
        [],
        spool,  # type: ignore[arg-type]  # the spool's interface, over the pipe
        policy=config.policy,
        limits=config.limits,
        checks=settings.checks,
        telemetry=relay,
        tick_interval_s=settings.tick_interval_s,
        export_full=lambda: bool(paused.value) or (export is not None and export.full),
        durable=settings.spool_path is not None,
    )
    # A key-less trace it closes alone is judged only if its spans did not move meanwhile.
    asker = Asker(channel.send)
    worker.pipeline.store = AskingStore(config.policy, worker.pipeline.store.clock, asker)
    worker.pipeline.store.revisions = worker.revisions
    worker.channel = channel
    worker.settings = settings
    worker.relay = relay
    worker.meters = meters
    worker.export = export
    # Plugin sinks (`emit.sinks`) run here, each process with its own; the metrics sink is
    # the parent's (one /metrics): what it records of the results goes back, tallied.
    worker.pipeline.sinks = [*sinks, *worker.pipeline.sinks, _ForwardSink(channel)]
    worker.start()
    channel.send(("ready", None))
    code = 0
    try:
        code = _serve(worker, conn, channel, asker)
    finally:
        spool.close()
    sys.exit(code)


def _nothing() -> None:
    return None


def _serve(worker: _ProcessWorker, conn: Connection, channel: _Channel, asker: Asker) -> int:
    stopping: threading.Thread | None = None
    beat_at = 0.0
    while True:
        now = time.monotonic()
        if now >= beat_at:
            beat_at = now + HEARTBEAT_S
            try:
                channel.send(("alive",))
            except OSError:  # the parent is gone: nothing here may be confirmed any more
                return 1
        if worker.crashed is not None:
            channel.send(("crashed", worker.crashed))
            return 1
        if stopping is not None and not stopping.is_alive():
            return 0
        if not conn.poll(min(0.2, HEARTBEAT_S)):
            continue
        try:
            message = conn.recv()
        except EOFError:
            if stopping is not None:  # the parent closed the pipe after the bye
                stopping.join()
                return 0
            return 1  # the parent is gone: nothing here may be confirmed any more
        if message[0] == "add":
            for item in message[1]:
                worker.enqueue(item)
        elif message[0] == "answer":
            asker.answered(message[1], message[2])
        elif message[0] == "stop" and stopping is None:
            # On its own thread: the last ticks may still ask questions, answered here.
            stopping = threading.Thread(
                target=_stop, args=(worker, channel, message[1], message[2]), daemon=True
            )
            stopping.start()


def _stop(worker: _ProcessWorker, channel: _Channel, evaluate_open: bool, deadline: float) -> None:
    export = worker.export
    # Before the deadline the exporters give up (retries end, a call in flight is cut), with
    # serve's margin, so the worker's last flush returns in time.
    budget = max(0.0, deadline - time.monotonic())
    watchdog = threading.Timer(budget - min(2.0, budget / 5), export.abort if export else _nothing)
    watchdog.daemon = True
    watchdog.start()
    try:
        worker.stop(evaluate_open=evaluate_open, deadline=deadline)
    finally:
        watchdog.cancel()
    if export is not None:
        if export.backlog:  # the lines serve writes for its own exporters with one process
            settings = worker.settings
            target = settings.export.endpoint or "the OTLP endpoint"
            spool = settings.spool_path
            report_unflushed(export, target, worker.unconfirmed_sessions, spool)
            export.abort()
        export.shutdown()
    worker.report()
    channel.send(("bye", worker.unconfirmed_sessions))
