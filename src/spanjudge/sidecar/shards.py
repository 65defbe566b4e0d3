"""`serve.workers` > 1: evaluation in several processes, one spool, one set of sinks.

`ShardedWorker` keeps the single worker's receiver side (budgets, the spool written before the
ack, backpressure) and its confirmation step (flush every sink, then release the sessions from
the spool), and hands evaluation to N spawned processes (`sidecar.evaluation_process`), each
owning the sessions whose key hashes to it (`sidecar.routing`). A process sends back what
this process's sinks (its metrics and its summary line) record of its results, tallied, which
is recorded here, and completions, which are confirmed here once the sinks accepted them. Each
completion carries the spool id of the last request its process had taken when the session
closed: a session's spool rows are all in requests routed to its owner, so that mark releases
exactly what the owner consumed, whatever the other processes are doing.

A process that dies makes the sidecar not ready (`crashed`), and `serve` exits non-zero; what
it had not confirmed is still spooled and replayed by the next start. A process that stops
answering (its heartbeat, `evaluation_process.HEARTBEAT_S`, stays away) makes the sidecar not
ready while it is silent; requests for its sessions are then only spooled, and those for the
other processes' sessions flow as before. Silent past `serve.worker_stuck_timeout`, it is
killed and a new one takes its place, given its sessions from the spool.
"""

from __future__ import annotations

import logging
import multiprocessing
import queue
import signal
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from multiprocessing import resource_tracker
from multiprocessing.connection import wait
from typing import Any

from spanjudge.config import Config
from spanjudge.emit.base import Sink
from spanjudge.emit.metrics import MetricsSink, MetricsTally
from spanjudge.engine import Engine
from spanjudge.judges.registry import budget_share
from spanjudge.pipeline import agent_spans
from spanjudge.sessions.revisions import Completion
from spanjudge.sessions.store import ClosePolicy
from spanjudge.sidecar import evaluation_process
from spanjudge.sidecar.config import ExportConfig
from spanjudge.sidecar.evaluation_process import (
    HEARTBEAT_S,
    Part,
    ProcessSettings,
    payload,
    replay_telemetry,
)
from spanjudge.sidecar.export_health import export_health
from spanjudge.sidecar.intake import FORMAT_PROTOBUF, BadRequest, Decoded, decode_heads
from spanjudge.sidecar.relay_metrics import Replayer
from spanjudge.sidecar.routing import Routable, Router
from spanjudge.sidecar.signals import STOP_SIGNALS
from spanjudge.sidecar.spool import MemorySpool, Spool, group_of
from spanjudge.sidecar.summary_log import Judged, SummaryLog
from spanjudge.sidecar.worker import Worker

log = logging.getLogger("spanjudge.sidecar")
_CONTEXT = multiprocessing.get_context("spawn")  # never fork a process that runs threads
_START_TIMEOUT_S = 120.0
_BATCH = 256  # requests per message to a process
_END = ("end",)  # ends a feeder (after the process said bye)


def _control(item: object) -> bool:
    """A message for the process itself (stop, an answer), not a routed request."""
    return isinstance(item, tuple) and bool(item) and isinstance(item[0], str)


def process_share(policy: ClosePolicy, workers: int) -> ClosePolicy:
    """What one of ``workers`` evaluation processes may hold: its share of the open-session
    budget (bytes and count) and of the closed sessions kept for revisions, so that the
    configured figures bound serve's memory whatever ``workers`` is. Keys hash evenly, so a
    process reaches its share about when one process would reach the whole; with few keys,
    one process may evict before the total is reached."""
    return replace(
        policy,
        max_open_bytes=max(1, policy.max_open_bytes // workers),
        max_open_sessions=max(1, policy.max_open_sessions // workers),
        keep_closed_sessions=-(-policy.keep_closed_sessions // workers),
    )


@dataclass(eq=False)
class _Process:
    index: int
    process: Any = None  # multiprocessing.Process, once started
    inbox: Any = None  # Connection parent -> process
    outbox: Any = None  # Connection process -> parent
    feed: queue.SimpleQueue[object] = field(default_factory=queue.SimpleQueue)
    # (request id, spans, accepted at, body bytes) handed over and not yet taken by the
    # process's pipeline
    backlog: deque[tuple[int, int, float, int]] = field(default_factory=deque)
    backlog_spans: int = 0
    backlog_bytes: int = 0
    rate: float | None = None  # spans per busy second its worker takes (it measures)
    open_sessions: int = 0
    # (open sessions, the oldest one's age in s) as last reported, and when
    open_now: tuple[tuple[int, float | None], float] | None = None
    export_full: bool = False
    over_budget: bool = False  # its open sessions over their memory budget, evictions left
    said_bye: bool = False
    gone: bool = False
    feeder: threading.Thread | None = None
    ready: bool = False  # built its engine (a replacement starts while the others run)
    heard_at: float = 0.0  # when its last message (a heartbeat at least) came
    # Silent too long: what is routed to it is only spooled (`skipped`), for its replacement.
    unresponsive: bool = False
    skipped: bool = False

    @property
    def name(self) -> str:
        return f"evaluation process {self.index} (pid {self.process.pid})"


class ShardedWorker(Worker):
    """A `Worker` whose evaluation runs in ``workers`` processes; same interface."""

    def __init__(
        self,
        engine: Engine,
        sinks: Sequence[Sink],
        spool: Spool | MemorySpool,
        *,
        workers: int,
        config: Config,
        export: ExportConfig,
        resource: dict[str, Any],
        checks: Any,
        keep_evaluated: int,
        stuck_timeout_s: float = 60.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(engine, sinks, spool, checks=checks, **kwargs)
        # Only the sinks given run here, on what the processes tallied of their results (the
        # verdict export and plugin sinks run in the processes).
        others = [s for s in sinks if not isinstance(s, (MetricsSink, SummaryLog))]
        if others:
            raise TypeError(f"serve.workers > 1 runs these sinks in no process: {others}")
        self.pipeline.sinks = list(sinks)
        policy = config.policy
        self._export = export
        # This process's pipeline only emits (its store stays empty); sessions are counted
        # open where they are.
        # Key-less spans wait until their process asks whether it may judge them alone (its
        # store closed their trace); twice the idle timeout is a backstop for memory.
        self._router = Router(workers, policy.key_attributes, hold_s=2 * policy.idle_timeout_s)
        # Whether evaluation is paused (a verdict export backlog is full), read by every
        # process: a byte of shared memory, not an Event, whose lock a process killed or
        # stopped while holding it would leave taken for every other one.
        self._paused = _CONTEXT.RawValue("b", 0)
        # each process's share of the open-session and judge budgets
        share = replace(
            config,
            policy=process_share(policy, workers),
            sections=budget_share(config.sections, workers),
        )
        self._settings = [
            ProcessSettings(
                index=i,
                config=share,
                export=export,
                resource=resource,
                checks=checks,
                spool_path=spool.path if isinstance(spool, Spool) else None,
                keep_evaluated=keep_evaluated,
                tick_interval_s=self.tick_interval_s,
                log_level=logging.getLogger().getEffectiveLevel(),
            )
            for i in range(workers)
        ]
        # Filled by replay before `start`, by receivers after.
        self._processes = [_Process(index=i) for i in range(workers)]
        # A process silent this long is replaced; silent half of it (5 s at most), it is
        # reported (`unresponsive`) and its sessions wait in the spool.
        self._stuck_timeout_s = stuck_timeout_s
        self._silent_s = max(2 * HEARTBEAT_S, min(stuck_timeout_s / 2, 5.0))
        # (key, revision) of results a sink here failed on: their completions are dropped
        self._not_emitted: set[tuple[str, int]] = set()
        # what judges and plugins recorded on the processes' global meter providers
        self._meters = Replayer()
        # Each process exports its own verdicts: a backlog in any one pauses them all and
        # refuses new requests (retryable), as the single worker does for its own.
        own_export_full = self.export_full
        self.export_full = lambda: own_export_full() or any(p.export_full for p in self._processes)
        if self.telemetry is not None:
            self.telemetry.set_open_sessions_callback(
                lambda: sum(p.open_sessions for p in self._processes)
            )

    def open_sessions(self) -> tuple[int, float | None] | None:
        """The processes' open sessions and the oldest one's age in seconds, as each last
        reported them (None until one has; a silent process counts with its last report)."""
        reports = [p.open_now for p in self._processes if p.open_now is not None]
        if not reports:
            return None
        now = time.monotonic()
        ages = [age + now - at for (_, age), at in reports if age is not None]
        return sum(n for (n, _), _ in reports), max(ages, default=None)

    @property
    def pids(self) -> tuple[int, ...]:
        return tuple(p.process.pid for p in self._processes if p.process is not None)

    def decode(self, body: bytes, fmt: str) -> Decoded:
        """A protobuf traces body's spans as `SpanHead`s: routed by what they carry, they
        cross to their evaluation process serialized (`evaluation_process.payload`), decoded
        only there. A JSON or logs body is decoded here: its records cross pickled (turning
        JSON into protobuf here would cost about what decoding it does)."""
        if fmt == FORMAT_PROTOBUF:
            return decode_heads(body, self.limits, self.checks, self._key_attributes)
        return super().decode(body, fmt)

    # --- receiver side (submit lock held) ---

    def _keys_needed(self) -> bool:
        return True  # routing reads them

    def _enqueue(
        self,
        request_id: int,
        records: Sequence[Routable],
        nbytes: int = 0,
        sizes: Any = None,
        keys: Sequence[tuple[str, str] | None] | None = None,
        refused: int = 0,
    ) -> None:
        now = time.monotonic()
        total = len(records) or 1
        for index, routed in self._router.route(records, sizes, keys).items():
            target = self._processes[index]
            if target.unresponsive and self.durable:
                # Spooled only: its replacement is given them from the spool, and a pipe
                # nobody reads must not hold them in memory meanwhile.
                target.skipped = True
                continue
            n = len(routed.records)
            share = nbytes * n // total  # the body's bytes in proportion to the spans routed
            target.feed.put(
                Part(
                    request_id=request_id,
                    spans=payload(routed.records),
                    released=routed.released,
                    resent=routed.resent,
                    sizes=routed.sizes,
                    span_count=n,
                    keys=routed.keys,
                )
            )
            target.backlog.append((request_id, n, now, share))
            target.backlog_spans += n
            target.backlog_bytes += share
            self.pending_spans += n

    def _pending_bytes(self) -> int:
        return sum(p.backlog_bytes for p in self._processes)

    # A silent or starting process's backlog does not refuse the others' sessions: the
    # heartbeat bounds how long it may hold them (`serve.worker_stuck_timeout`).

    def _behind_s(self) -> float:
        heads = [p.backlog[0][2] for p in self._answering() if p.backlog]
        return time.monotonic() - min(heads) if heads else 0.0

    def _expected_wait_s(self) -> float:
        return max((p.backlog_spans / p.rate for p in self._answering() if p.rate), default=0.0)

    def _over_budget(self) -> bool:
        return any(p.over_budget for p in self._answering())

    def _answering(self) -> list[_Process]:
        return [p for p in self._processes if p.ready and not p.unresponsive]

    def unresponsive(self) -> str | None:
        """The processes that stopped answering, named for `/healthz` (None: all answer)."""
        now = time.monotonic()
        silent = [
            f"{p.name} has not answered for {now - p.heard_at:.0f}s"
            for p in self._processes
            if p.unresponsive
        ]
        if not silent:
            return None
        return (
            "; ".join(silent) + f" (replaced once silent for {self._stuck_timeout_s:g}s,"
            " serve.worker_stuck_timeout)"
        )

    # --- processes ---

    def start(self) -> None:
        """Spawn the processes and wait until each one built its engine."""
        for p in self._processes:
            self._spawn(p)
        deadline = time.monotonic() + _START_TIMEOUT_S
        for p in self._processes:
            if not p.outbox.poll(max(0.0, deadline - time.monotonic())):
                self._kill_all()
                raise RuntimeError(f"{p.name} did not start within {_START_TIMEOUT_S:.0f}s")
            try:
                p.outbox.recv()  # "ready"
            except EOFError:
                p.process.join(5)
                code = p.process.exitcode
                self._kill_all()
                raise RuntimeError(f"{p.name} failed to start (exit code {code})") from None
            p.ready = True
            p.heard_at = time.monotonic()
        for p in self._processes:
            self._start_feeder(p)
        self._thread = threading.Thread(target=self._run, name="spanjudge-sidecar", daemon=True)
        self._thread.start()
        log.debug("evaluating in %d processes", len(self._processes))

    def _spawn(self, p: _Process) -> None:
        """Start ``p``'s process; it says "ready" once it built its engine."""
        settings = self._settings[p.index]
        inbox_read, inbox = _CONTEXT.Pipe(duplex=False)
        outbox, outbox_write = _CONTEXT.Pipe(duplex=False)
        process = _CONTEXT.Process(
            target=evaluation_process.run,
            args=(settings, inbox_read, outbox_write, self._paused),
            name=f"spanjudge-eval-{settings.index}",
            daemon=True,
        )
        # Born with SIGTERM and SIGINT blocked (the mask outlives exec): one sent to every
        # process while this one starts (`systemctl stop`, Ctrl-C) waits until it ignores
        # them (`evaluation_process.run`), instead of ending it midway through its start.
        # multiprocessing starts its resource tracker on the first spawn and unblocks both
        # signals when it has: started here first, it cannot undo the mask below.
        resource_tracker.ensure_running()
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        try:
            process.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        inbox_read.close()
        outbox_write.close()
        p.process, p.inbox, p.outbox = process, inbox, outbox
        p.heard_at = time.monotonic()

    def _start_feeder(self, p: _Process) -> None:
        p.feeder = threading.Thread(
            target=self._feed, args=(p,), name=f"spanjudge-feed-{p.index}", daemon=True
        )
        p.feeder.start()

    def _feed(self, p: _Process) -> None:
        """Send queued requests to one process, several per message, and the control messages
        (answers, stop) in their order; until `stop` ends it."""
        try:
            while True:
                first = p.feed.get()
                if _control(first):
                    if first == _END:
                        return
                    p.inbox.send(first)
                    continue
                batch = [first]
                control: Any = None
                while len(batch) < _BATCH:
                    try:
                        item = p.feed.get_nowait()
                    except queue.Empty:
                        break
                    if _control(item):
                        control = item
                        break
                    batch.append(item)
                p.inbox.send(("add", batch))
                if control == _END:
                    return
                if control is not None:
                    p.inbox.send(control)
        except (OSError, ValueError) as exc:  # the process is gone; the reader reports it
            log.debug("%s: cannot send: %s", p.name, exc)

    def _loop(self) -> None:
        """Take what the processes send, emit, and confirm; until every one said bye."""
        while True:
            live = [p for p in self._processes if not p.gone and not p.said_bye]
            if not live:
                return
            if self._abandoned:
                return
            self._paused.value = self.export_full()
            ready = wait([p.outbox for p in live], timeout=self.tick_interval_s)
            for p in live:
                if p.outbox in ready:
                    self._receive(p)
            self._safe(self._commit)
            if not self._stopped.is_set():
                self._safe(self._watch)

    def _receive(self, p: _Process) -> None:
        while not p.gone and p.outbox.poll():
            try:
                message = p.outbox.recv()
            except (EOFError, OSError):
                self._gone(p)
                return
            p.heard_at = time.monotonic()
            self._handle(p, message)

    def _handle(self, p: _Process, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind == "results":  # sessions (key, revision), their metrics tally, summary counts
            _, sessions, tally, judged = message
            if not self._record(tally, judged):
                self._not_emitted.update(sessions)
        elif kind == "done":
            # A session a sink here failed on stays spooled, as with one process (its
            # completion follows its result, from the same process). Each comes as the
            # fields of its `Completion` (`evaluation_process._PipeSpool.complete`).
            for key, revision, groups, upto in message[1]:
                if (key, revision) in self._not_emitted:
                    self._not_emitted.discard((key, revision))
                else:
                    self._unconfirmed.append(
                        Completion(key=key, revision=revision, groups=groups, upto=upto)
                    )
        elif kind == "progress":
            _, upto, counts, durations, open_sessions, export_full, recorded, rate, opened, over = (
                message
            )
            p.open_sessions = open_sessions
            if opened is not None:
                p.open_now = opened, time.monotonic()
            p.export_full = export_full
            p.rate = rate
            p.over_budget = over
            if self.telemetry is not None:
                replay_telemetry(self.telemetry, counts, durations)
            self._meters.replay(recorded)
            with self._submit_lock:
                while p.backlog and p.backlog[0][0] <= upto:
                    _, n, _, share = p.backlog.popleft()
                    self.pending_spans -= n
                    p.backlog_spans -= n
                    p.backlog_bytes -= share
        elif kind == "ask":  # may it judge these key-less traces alone (they did not move)?
            with self._submit_lock:
                answers = self._router.decide(message[2], p.index)
            p.feed.put(("answer", message[1], answers))
        elif kind == "health":  # its verdict export failing or working again
            _, signal, ok, why = message
            export_health(self._export).result(signal, ok, source=str(p.index), why=why)
        elif kind == "crashed":
            self._died(p, message[1])
        elif kind == "bye":
            p.said_bye = True
        elif kind == "ready":  # a replacement built its engine
            p.ready = True

    def _record(self, tally: MetricsTally, judged: Judged) -> bool:
        recorded = True
        for sink in self.pipeline.sinks:
            try:
                if isinstance(sink, MetricsSink):
                    sink.replay(tally)
                elif isinstance(sink, SummaryLog):
                    sink.add(judged)
            except Exception:
                recorded = False
                self.guard.failed(f"emit:{type(sink).__name__}")
        return recorded

    def _gone(self, p: _Process) -> None:
        p.gone = True
        if not p.said_bye:
            p.process.join(2)
            self._died(p, f"exited with code {p.process.exitcode}")

    def _died(self, p: _Process, why: str) -> None:
        if self.crashed is None:
            self.crashed = f"{p.name} {why}"
            log.critical(
                "%s stopped: %s; its sessions stay in the spool until the next start", p.name, why
            )

    # --- liveness ---

    def _watch(self) -> None:
        """Report a process that went silent, replace one silent past the bound."""
        now = time.monotonic()
        for p in list(self._processes):
            if p.gone or p.said_bye:
                continue
            silent = now - p.heard_at
            if not p.ready:  # building its engine: no heartbeat yet
                if silent > _START_TIMEOUT_S:
                    self._replace(p, f"did not start within {_START_TIMEOUT_S:.0f}s")
                continue
            if silent > self._stuck_timeout_s:
                self._replace(p, f"has not answered for {silent:.0f}s")
            elif silent > self._silent_s and not p.unresponsive:
                with self._submit_lock:
                    p.unresponsive = True
                log.error(
                    "%s has not answered for %.0fs; its sessions wait in the spool, and it is"
                    " replaced if silent for %gs (serve.worker_stuck_timeout)",
                    p.name,
                    silent,
                    self._stuck_timeout_s,
                )
            elif silent <= self._silent_s and p.unresponsive:
                if p.skipped:  # it missed requests: only a replacement is given them
                    self._replace(p, "answers again but missed requests meanwhile")
                else:
                    with self._submit_lock:
                        p.unresponsive = False
                    log.warning("%s answers again", p.name)

    def _replace(self, p: _Process, why: str) -> None:
        """Kill ``p``'s process and start another in its place, given its sessions from the
        spool: the requests routed to it that no confirmed completion released."""
        fate = (
            "replaying its sessions from the spool"
            if self.durable
            else "the spool is off: the sessions it held are lost"
        )
        log.error("%s %s; killing it and starting another, %s", p.name, why, fate)
        p.process.kill()  # SIGKILL ends a stopped process too
        p.process.join(5)
        p.gone = True
        # What it sent before it stopped counts: completions it flushed are confirmed first,
        # so that the replay leaves their sessions out.
        try:
            while p.outbox.poll():
                self._handle(p, p.outbox.recv())
        except (EOFError, OSError):
            pass
        self._safe(self._commit)
        p.feed.put(_END)
        p.inbox.close()
        p.outbox.close()
        fresh = _Process(index=p.index)
        with self._submit_lock:
            # Under the submit lock: the replay is in spool id order, ahead of what arrives next.
            self.pending_spans -= p.backlog_spans
            self._processes[p.index] = fresh
            replayed = self._replay_into(fresh)
        self._spawn(fresh)
        self._start_feeder(fresh)
        log.warning("%s started in its place with %d spooled spans", fresh.name, replayed)

    def _replay_into(self, p: _Process) -> int:
        """Queue for ``p`` the spool's unfinished spans that it owns (submit lock held)."""
        count = 0
        now = time.monotonic()
        keys = self._key_attributes
        for stored in self.spool.replay():
            try:
                decoded = self.decode(stored.body, stored.format)
            except BadRequest:  # it was accepted once with the same checks
                continue
            records, _ = agent_spans(
                [
                    r
                    for r in decoded.records
                    if group_of(r, keys) in stored.groups and self._router.owner_of(r) == p.index
                ]
            )
            if not records:
                continue
            n = len(records)
            share = len(stored.body) * n // len(decoded.records)
            p.feed.put(
                Part(
                    request_id=stored.request_id,
                    spans=payload(records),
                    released=[],
                    resent=0,
                    sizes=None,
                    span_count=n,
                    keys=[],  # a replay: each session's revision is read when it opens
                )
            )
            p.backlog.append((stored.request_id, n, now, share))
            p.backlog_spans += n
            p.backlog_bytes += share
            self.pending_spans += n
            count += n
        return count

    # --- shutdown ---

    def stop(self, *, evaluate_open: bool, deadline: float) -> None:
        """Stop intake; each process drains, evaluates or keeps its open sessions, and says bye;
        then the last results are flushed and confirmed."""
        with self._submit_lock:
            self._stopped.set()
        now = time.monotonic()
        # The processes' judges get most of the budget; flushing the sinks here the rest.
        until = now + 0.75 * max(0.0, deadline - now)
        for p in self._processes:
            p.feed.put(("stop", evaluate_open, until))
        if self._thread is not None:
            self._thread.join(max(0.0, deadline - time.monotonic()))
            if self._thread.is_alive():
                self._abandoned = True
                log.error("evaluation processes did not stop in time; their sessions stay spooled")
                self._kill_all()
                return
        self.flush_timeout_s = max(0.1, deadline - time.monotonic())
        self._safe(self._commit)
        for p in self._processes:
            if p.process is None:
                continue
            p.feed.put(_END)
            if p.feeder is not None:
                p.feeder.join(1.0)
            p.inbox.close()
            p.process.join(max(0.1, deadline - time.monotonic()))
        self._kill_all()

    def _kill_all(self) -> None:
        for p in self._processes:
            if p.process is not None and p.process.is_alive():
                p.process.kill()
                p.process.join(5)
