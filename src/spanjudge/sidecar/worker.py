"""The sidecar's one owner thread: spooled spans in, sessions evaluated, spool rows released.

Receivers call `Worker.submit` from many threads: it checks the budgets, writes the request to
the spool (durably, before the caller acknowledges) and queues the decoded spans. The worker
thread feeds them to the shared `Pipeline`, evaluates sessions as they close, flushes the sinks,
and only when every sink confirmed does it confirm the sessions through the revision ledger (the
spool releases them). A crash in between re-evaluates those sessions on restart with the same
revision, hence the same verdict ids.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, cast

from spanjudge.emit.base import Sink
from spanjudge.emit.metrics import SelfTelemetry
from spanjudge.engine import Engine
from spanjudge.guard import Guard
from spanjudge.pipeline import Pipeline, agent_spans
from spanjudge.sessions.keys import session_key
from spanjudge.sessions.revisions import Completion, Revisions
from spanjudge.sessions.store import ClosePolicy, SessionStore
from spanjudge.sidecar.config import InputConfig
from spanjudge.sidecar.intake import BadRequest, Decoded, decode_body
from spanjudge.sidecar.lag import LagMeter
from spanjudge.sidecar.spool import MemorySpool, Spool, StorageError, group_for, group_of
from spanjudge.spans.limits import Limits
from spanjudge.spans.record import SpanRecord

log = logging.getLogger("spanjudge.sidecar")
_STOP = object()
_CYCLE_S = 1.0  # about how long one cycle of adding and evaluating takes under load
# Sessions a tick closes, evaluates and exports at a time (each is one evaluation span and a
# log record per verdict in the export backlog until its flush).
_CLOSE_BATCH = 256
_BEFORE_STOP = "busy with what closed before the stop"  # `Worker._finishing` until `_finish`
_Key = tuple[str, str] | None  # a span's `session_key`


class Overloaded(Exception):
    """A budget is full: the caller answers with a retryable status."""


class Worker:
    """Owns the pipeline; thread-safe `submit`, everything else on the worker thread."""

    def __init__(
        self,
        engine: Engine,
        sinks: Sequence[Sink],
        spool: Spool | MemorySpool,
        *,
        policy: ClosePolicy,
        limits: Limits,
        checks: InputConfig,
        telemetry: SelfTelemetry | None = None,
        max_pending_spans: int = 200_000,
        max_pending_age_s: float = 30.0,
        max_pending_bytes: int = 64 * 1024 * 1024,
        tick_interval_s: float = 0.25,
        flush_timeout_s: float = 10.0,
        export_full: Callable[[], bool] = lambda: False,
        clock: Callable[[], float] = time.monotonic,
        durable: bool | None = None,
    ) -> None:
        self.spool = spool
        self.guard = Guard(
            log, "sidecar", on_error=telemetry.internal_error if telemetry is not None else None
        )
        # The spool is the ledger's record: revisions continue above what it recorded.
        self.revisions = Revisions(policy.keep_closed_revisions, record=spool)
        self.pipeline = Pipeline(
            engine, SessionStore(policy, clock, self.revisions), sinks, telemetry=telemetry
        )
        self.telemetry = telemetry
        self.limits = limits
        self.checks = checks
        self.max_pending_spans = max_pending_spans
        self.max_pending_age_s = max_pending_age_s
        self.max_pending_bytes = max_pending_bytes
        # the requests whose spans a tick has not yet taken through closing and evaluation
        self.lag = LagMeter()
        self.tick_interval_s = tick_interval_s
        self.flush_timeout_s = flush_timeout_s
        self.export_full = export_full
        # whether open sessions outlive a shutdown in the spool (an evaluation process is told)
        self.durable = isinstance(spool, Spool) if durable is None else durable
        self.pending_spans = 0
        # SQLite's message while the spool cannot write; /healthz is not ready meanwhile.
        self.storage_problem: str | None = None
        self.evaluated_sessions = 0
        # Set after each tick: the open sessions are over their memory budget and evictions
        # are left for the next ticks; receivers refuse meanwhile.
        self.over_budget = False
        self.crashed: str | None = None  # why the worker thread ended by itself, if it did
        self._key_attributes = policy.key_attributes
        self._submit_lock = threading.Lock()
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._last_added = 0
        self.caught_upto = 0  # the last request a tick took through closing and evaluation
        # (request id, sessions the store had opened once it was added, the latest end-marker
        # or turn close set by then): which requests the closes are done with (`_closed_upto`)
        self._added: deque[tuple[int, int, float]] = deque()
        self._unconfirmed: list[Completion] = []
        self._unconfirmed_said = False  # said once per streak of failed flushes, not each tick
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()
        # Set when a shutdown gave up waiting: the thread ends at its next step, spool untouched.
        self._abandoned = False
        self._finish_with = (False, 0.0)  # what `stop` asked: evaluate open sessions?, deadline
        self._finishing = _BEFORE_STOP  # how far the finish got

    # --- receiver side (any thread) ---

    def submit(
        self, body: bytes, fmt: str, records: Sequence[SpanRecord], sizes: Any = None
    ) -> None:
        """Spool and queue one request's spans (``sizes``, if decoded); `Overloaded` when full."""
        # Not spooled: spanjudge's own spans, which the pipeline skips (no session releases them).
        records, sizes = agent_spans(records, sizes)
        if not records:
            return
        n = len(records)
        # Each span's session key, looked up once for its spool group, its routing and its
        # session (the store is given them, with the key attributes skipped for their type).
        keys = None
        refused = 0
        if self._keys_needed():

            def count_refused() -> None:
                nonlocal refused
                refused += 1

            keys = [session_key(r, self._key_attributes, count_refused) for r in records]
        groups: set[str] = set()
        if self.durable and keys is not None:
            # A request's spans share few keys: each distinct one's group made once.
            groups = {group_for(found, "") for found in set(keys) if found is not None}
            if None in keys:
                groups.update(
                    group_for(None, r.trace_id)
                    for r, found in zip(records, keys, strict=True)
                    if found is None
                )
        with self._submit_lock:
            if (reason := self._refusal(len(body), n)) is not None:
                raise Overloaded(reason)
            # Append and enqueue under one lock: queue order is spool id order (`Completion.upto`).
            try:
                request_id = self.spool.append(body, fmt, groups)
            except StorageError as exc:
                self._storage_failed(exc)
                raise Overloaded(f"the spool cannot store the request: {exc}") from None
            self._storage_ok()
            self._enqueue(request_id, records, len(body), sizes, keys, refused)

    def _keys_needed(self) -> bool:
        """Whether `submit` needs the spans' session keys (for their spool groups)."""
        return self.durable

    def decode(self, body: bytes, fmt: str) -> Decoded:
        """One request body's spans in the form this worker takes them (`intake.decode_body`)."""
        return decode_body(body, fmt, self.limits, self.checks)

    def refusal(self, body_bytes: int) -> str | None:
        """Why a request of ``body_bytes`` would be refused now, or None: asked before the body
        is decoded, so a client resending under backpressure costs no decoding."""
        with self._submit_lock:
            return self._refusal(body_bytes, 0)

    def _refusal(self, body_bytes: int, spans: int) -> str | None:
        """Which budget refuses a request of ``body_bytes`` and ``spans`` (lock held)."""
        if self._stopped.is_set():
            return "shutting down"
        if self.crashed is not None:
            return f"the evaluation worker died ({self.crashed}); restarting"
        behind = self._behind_s()
        if behind > self.max_pending_age_s:
            return f"evaluation is {behind:.0f}s behind the accepted requests"
        # Half the bound for what is waiting: a request accepted now is judged in about
        # that time, and the age bound above stays a backstop for a wrong estimate.
        ahead = self._expected_wait_s()
        if ahead > self.max_pending_age_s / 2:
            return (
                f"evaluation is behind the accepted requests: it needs {ahead:.0f}s for"
                " what is waiting"
            )
        if self.pending_spans + spans > self.max_pending_spans and self.pending_spans > 0:
            return f"{self.pending_spans} spans waiting for the pipeline"
        # Memory, not only counts: what waits is held decoded until a tick takes it.
        waiting = self._pending_bytes()
        if waiting + body_bytes > self.max_pending_bytes and waiting > 0:
            return (
                f"{waiting} bytes of requests waiting for evaluation"
                f" (serve.max_pending_bytes {self.max_pending_bytes})"
            )
        if self._over_budget():
            # The store evicts (evaluates early) a batch a tick: what is accepted now would
            # only push it further over its budget meanwhile.
            return (
                "the open sessions are over their memory budget (sessions.max_open_bytes);"
                " the oldest are being evaluated early"
            )
        if self.export_full():
            # Evaluation is paused until the endpoint takes the backlog: refuse upstream
            # (retryable) rather than accept spans that cannot be judged for a while.
            return "the verdict export backlog is full (endpoint slow or down)"
        if not self.spool.room_for(body_bytes):
            return f"spool full ({self.spool.bytes} of {self.spool.max_bytes} bytes)"
        return None

    def _behind_s(self) -> float:
        """Age of the oldest request no tick took through closing and evaluation (lock held)."""
        return self.lag.oldest_age_s(time.monotonic())

    def _expected_wait_s(self) -> float:
        """Seconds evaluation needs for what is lagging, at its measured rate (lock held)."""
        return self.lag.expected_wait_s()

    def _pending_bytes(self) -> int:
        """Body bytes of the accepted requests no tick has taken yet (lock held)."""
        return self.lag.bytes

    def _over_budget(self) -> bool:
        """Whether the last tick left evictions over the memory budget (lock held)."""
        return self.over_budget

    def _enqueue(
        self,
        request_id: int,
        records: Sequence[SpanRecord],
        nbytes: int = 0,
        sizes: Any = None,
        keys: Sequence[tuple[str, str] | None] | None = None,
        refused: int = 0,
    ) -> None:
        """Hand one spooled request's spans to evaluation, in spool id order (lock held);
        ``keys``: each span's `session_key`, when `submit` looked them up (``refused``: the
        key attributes it skipped for their type)."""
        self.pending_spans += len(records)
        self._queue.put((request_id, records, sizes, keys, refused))
        self.lag.accepted(request_id, len(records), time.monotonic(), nbytes)

    def _storage_failed(self, exc: StorageError) -> None:
        if self.storage_problem is None:  # the cause once, not once a request
            log.error(
                "the spool %s cannot write: %s; answering retryable errors until it can",
                getattr(self.spool, "path", ""),
                exc,
            )
        self.storage_problem = str(exc)

    def _storage_ok(self) -> None:
        if self.storage_problem is not None:
            log.warning("the spool writes again (it failed with: %s)", self.storage_problem)
            self.storage_problem = None

    # --- worker thread ---

    def replay(self) -> int:
        """Queue the spool's unfinished requests (call before `start`); returns spans queued."""
        count = 0
        for stored in self.spool.replay():
            try:
                decoded = self.decode(stored.body, stored.format)
            except BadRequest:  # it was accepted once with the same checks; cannot happen
                log.error("spooled request %d no longer decodes; kept", stored.request_id)
                continue
            records, _ = agent_spans(
                [r for r in decoded.records if group_of(r, self._key_attributes) in stored.groups]
            )
            with self._submit_lock:
                self._enqueue(stored.request_id, records, len(stored.body))
            count += len(records)
        return count

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="spanjudge-sidecar", daemon=True)
        self._thread.start()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _run(self, step: Callable[[], None] | None = None) -> None:
        try:
            (step or self._loop)()
        except BaseException as exc:  # a thread that ends must say so
            self.crashed = f"{type(exc).__name__}: {exc}"
            log.critical("the evaluation worker stopped: %s", self.crashed, exc_info=True)

    def _loop(self) -> None:
        self._take()
        self._finish()  # `stop` waits for it until its deadline only

    def _take(self) -> None:
        next_tick = time.monotonic() + self.tick_interval_s
        while not self._abandoned:
            timeout = max(0.0, next_tick - time.monotonic())
            try:
                item = self._queue.get(timeout=timeout)
            except queue.Empty:
                item = None
            if item is _STOP:
                return
            full = False
            if item is not None:
                added = self._add(item)
                # Take what else is waiting without sleeping, up to a tick's worth of time, and
                # as many spans as a cycle of about a second evaluates: verdicts leave steadily.
                cap = self.lag.cycle_spans(max(self.tick_interval_s, _CYCLE_S))
                while time.monotonic() < next_tick:
                    if added >= cap:
                        full = True
                        break
                    try:
                        item = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if item is _STOP or self._abandoned:
                        return
                    added += self._add(item)
            if (full or time.monotonic() >= next_tick) and not self._abandoned:
                self._safe(self._tick)
                next_tick = time.monotonic() + self.tick_interval_s

    def _add(self, item: object) -> int:
        """Feed one request's spans to the pipeline; returns how many."""
        request_id, records, sizes, keys, refused = cast(
            tuple[int, list[SpanRecord], list[int] | None, list[_Key] | None, int], item
        )
        started = time.monotonic()
        try:
            # What is queued is agent spans only (`submit`, `replay`, the routing process).
            self.pipeline.add(records, sizes, agent_only=True, keys=keys, refused=refused)
        except Exception:  # the pipeline contains its own errors; this is a last guard
            self.guard.failed("add")
        self.lag.busy(time.monotonic() - started)
        self._last_added = request_id
        store = self.pipeline.store
        self._added.append((request_id, store.opened, store.latest_close_at))
        with self._submit_lock:
            self.pending_spans -= len(records)
        return len(records)

    def _tick(self) -> None:
        # A full export backlog pauses evaluation: spans pile up, then receivers push back.
        if self.export_full():
            self._confirm()
            return
        started = time.monotonic()
        mark = self._last_added
        store = self.pipeline.store
        # Sessions close, are evaluated and exported a batch at a time, with room in the
        # export backlog checked before each: many closing at once (a flood of ended
        # sessions, evictions over the memory budget) would otherwise hold all their results
        # and export items in memory. What is left stays open in the store (its memory
        # budget) for the next tick, and the requests that brought it count as lagging, so
        # receivers refuse (retryably) once the lag is too long.
        until = started + max(self.tick_interval_s, _CYCLE_S)
        while True:
            self.pipeline.tick(mark=mark, limit=_CLOSE_BATCH)
            # Closed and evaluated: the lag moves now, before the export of this batch.
            self._caught_up(self._closed_upto(mark))
            self._confirm()
            if (
                not store.closing_left()
                or self._abandoned
                or self.export_full()
                or time.monotonic() >= until
            ):
                break
        self.over_budget = store.over_budget
        self.lag.busy(time.monotonic() - started)
        # behind all along: closes left, or requests waiting to be added
        self.lag.sample(time.monotonic(), behind=store.closing_left() or not self._queue.empty())

    def _closed_upto(self, mark: int) -> int:
        """The last request up to ``mark`` that the closes are done with: the sessions it ended
        (an end marker, a turn's root span) were due by the time the last close looked, and
        none it opened (nor any opened before) is left due or over the memory budget. A
        session waiting for its idle timeout is no lag; one that ended is, until it closed."""
        store = self.pipeline.store
        before = store.closed_before()
        checked = store.due_checked_at
        added = self._added
        caught = self.caught_upto
        while added:
            request_id, opened, close_at = added[0]
            if request_id > mark or close_at > checked or (before is not None and opened >= before):
                break
            caught = added.popleft()[0]
        return caught

    def _caught_up(self, upto: int) -> None:
        """Every request up to spool id ``upto`` went through closing and evaluation."""
        if upto <= self.caught_upto:
            return
        with self._submit_lock:
            self.lag.caught_up(upto)
        self.caught_upto = upto

    def _confirm(self) -> None:
        for evaluated in self.revisions.take_evaluated():
            session = evaluated.session
            # Its own group and the traces of its key-less spans (the store kept them): a trace
            # whose key-less spans are another session's (one closed idle before the key came)
            # keeps its rows.
            keyless = sorted(group_for(None, trace_id) for trace_id in session.keyless_traces)
            self._unconfirmed.append(
                Completion(
                    key=session.key,
                    revision=session.revision,
                    groups=("s:" + session.key, *keyless),
                    # The last request taken when the session closed: its judged verdicts may
                    # come ticks later, and rows added since belong to what is open now.
                    upto=evaluated.mark,
                )
            )
        self._commit()

    def _commit(self) -> None:
        """Flush the sinks; once every one confirmed, release the sessions from the spool."""
        if not self._unconfirmed or self._abandoned:
            return
        if not self.pipeline.flush(self.flush_timeout_s):
            if not self._stopped.is_set():  # at shutdown the sidecar reports what stays spooled
                log.log(
                    logging.DEBUG if self._unconfirmed_said else logging.WARNING,
                    "sinks did not confirm %d sessions; they stay spooled and are retried",
                    len(self._unconfirmed),
                )
                self._unconfirmed_said = True
            return
        self._unconfirmed_said = False
        done, self._unconfirmed = self._unconfirmed, []
        try:
            self.revisions.confirm(done)
        except StorageError as exc:
            # Exported but not yet forgotten: tried again next tick (the flush is then empty).
            self._unconfirmed = done + self._unconfirmed
            with self._submit_lock:
                self._storage_failed(exc)
            return
        if self.storage_problem is not None:
            with self._submit_lock:
                self._storage_ok()
        self.evaluated_sessions += len(done)

    @property
    def store(self) -> SessionStore:
        """The pipeline's session store (read it only from the worker thread, or when idle)."""
        return self.pipeline.store

    @property
    def unconfirmed_sessions(self) -> int:
        """Sessions evaluated whose verdicts no sink confirmed yet (their spans stay spooled)."""
        return len(self._unconfirmed)

    def _safe(self, step: Callable[[], None]) -> None:
        try:
            step()
        except BaseException:  # survive anything a tick throws (a plugin's SystemExit too)
            self.guard.failed("sidecar_tick")

    # --- shutdown ---

    def stop(self, *, evaluate_open: bool, deadline: float) -> None:
        """Stop intake, drain, spool (or evaluate) open sessions, flush; never past ``deadline``."""
        with self._submit_lock:
            self._stopped.set()
        self._finish_with = (evaluate_open, deadline)
        self._queue.put(_STOP)
        if self._thread is None:
            self._finish()
            return
        self._thread.join(max(0.0, deadline - time.monotonic()))
        if not self._thread.is_alive() and self._finishing == _BEFORE_STOP:  # died (`crashed`)
            self._thread = threading.Thread(target=self._run, args=(self._finish,), daemon=True)
            self._thread.name = "spanjudge-sidecar-finish"
            self._thread.start()
            self._thread.join(max(0.0, deadline - time.monotonic()))
        if self._thread.is_alive():
            self._abandoned = True  # it ends after the step it is in, touching nothing
            log.error(
                "worker did not stop in time (%s); open sessions stay in the spool",
                self._finishing,
            )

    def _finish(self) -> None:
        """The end of `stop`, once the worker thread took `_STOP` off the queue."""
        evaluate_open, deadline = self._finish_with
        self._finishing = "adding the last requests"
        while not self._abandoned and not self._queue.empty():  # after _STOP (the one reader)
            item = self._queue.get_nowait()
            if item is not _STOP:
                self._add(item)
        if self._abandoned:
            return
        now = time.monotonic()
        # Judgments still out get most of what is left; the sinks' flush keeps a fifth.
        until = now + 0.8 * max(0.0, deadline - now)
        mark = self._last_added
        store = self.pipeline.store
        every = evaluate_open or not self.durable
        # A batch at a time, each exported before the next, as a tick does: the results and
        # export items of every open session at once would not fit the memory budgets. What
        # the time (or a full export backlog) leaves open stays in the spool.
        while True:
            if every:
                self._finishing = "evaluating the open sessions"
                self.pipeline.close_all("shutdown", until=until, mark=mark, limit=_CLOSE_BATCH)
                left = not store.empty
            else:
                # Open sessions stay spooled; those already closed are emitted, judged or not.
                self._finishing = "evaluating the sessions that closed"
                self.pipeline.tick(mark=mark, limit=_CLOSE_BATCH)
                self.pipeline.drain(until=until)
                left = store.closing_left()
            self._finishing = "flushing the sinks"
            self.flush_timeout_s = max(0.1, deadline - time.monotonic())
            self._safe(self._confirm)  # touches nothing once abandoned (`_commit`)
            if not left or self._abandoned:
                return
            if self.export_full() or time.monotonic() >= until:
                break
        if every:
            fate = (
                "they stay in the spool and are evaluated on the next start"
                if self.durable
                else "they are lost (the spool is off)"
            )
            log.warning(
                "shutdown: %d open session(s) not evaluated in time (serve.shutdown_timeout)%s; %s",
                len(store.open),
                " with the verdict export backlog full" if self.export_full() else "",
                fate,
            )
