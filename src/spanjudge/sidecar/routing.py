"""Which evaluation process owns a span, when `serve.workers` > 1.

A session belongs to the process its key hashes to (CRC-32 of the key: stable across restarts
and processes, unlike `hash()`). A key-less span belongs where its trace's key went (the store
joins key-less spans to the first session key seen in their trace); a key-less span of a trace
with no key yet goes to the process its trace id hashes to, where it waits as the store would
let it wait. When the trace's key arrives and is owned elsewhere, the spans that waited are
sent again to the owner, right after the keyed span, and the first process is told to release
them, so every span is in exactly the session a single store would have put it in.

The first process never judges such a trace alone on its own say: when its store closes it
(idle timeout, eviction over the memory budget), it asks `decide` first, and judges it only if
its spans did not move; from then on they stay there. So a key arriving before the store
closed the trace joins them, one arriving after finds them judged alone, as in one store, and
no span is judged in two sessions. The spans that wait are held here until that answer (twice
the idle timeout at most, a backstop) and at most ``max_held_spans`` of them: past that, the
oldest stay where they are, and a key that comes later for them no longer moves them.
"""

from __future__ import annotations

import time
import zlib
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from spanjudge.sessions.keys import session_key
from spanjudge.spans.otlp_proto import SpanHead
from spanjudge.spans.record import SpanRecord

# A span as routed: decoded, or a protobuf span still in wire form (`spans.otlp_proto`).
Routable = SpanRecord | SpanHead

_MAX_TRACES = 200_000  # as the store: the oldest traces' keys are forgotten first


def owner(key: str, workers: int) -> int:
    """The evaluation process (0-based) that owns session ``key``."""
    return zlib.crc32(key.encode("utf-8", "surrogatepass")) % workers


@dataclass(slots=True)
class _Held:
    process: int
    since: float
    spans: list[Routable] = field(default_factory=list)


@dataclass(slots=True)
class Routed:
    """One process's part of a request: spans in order, and traces it must release."""

    records: list[Routable] = field(default_factory=list)
    released: list[str] = field(default_factory=list)
    # spans among ``records`` sent a second time (already counted as received once)
    resent: int = 0
    # each record's `estimate_size`, when the decoder worked out all of them (else None: the
    # store works them out)
    sizes: list[int] | None = None
    # the session keys its spans carry, each once
    keys: list[str] = field(default_factory=list)


class Router:
    """Not thread-safe: the sidecar routes under its submit lock, in spool id order. It is
    given agent spans only: the worker leaves spanjudge's own out first (`pipeline.agent_spans`)."""

    def __init__(
        self,
        workers: int,
        key_attributes: Sequence[str],
        *,
        hold_s: float,
        max_held_spans: int = 100_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.workers = workers
        self.key_attributes = tuple(key_attributes)
        self.hold_s = hold_s
        self.max_held_spans = max_held_spans
        self.clock = clock
        self._trace_owner: OrderedDict[str, int] = OrderedDict()
        self._held: OrderedDict[str, _Held] = OrderedDict()
        self.held_spans = 0
        self.moved_spans = 0

    def route(
        self,
        records: Sequence[Routable],
        sizes: Sequence[int] | None = None,
        keys: Sequence[tuple[str, str] | None] | None = None,
    ) -> dict[int, Routed]:
        """Each record's process; ``keys``: each record's `session_key`, if looked up already."""
        out: dict[int, Routed] = {}

        def part(process: int) -> Routed:
            routed = out.get(process)
            if routed is None:
                routed = out[process] = Routed(sizes=None if sizes is None else [])
            return routed

        known: Sequence[int] = () if sizes is None else sizes
        if keys is None:
            keys = [session_key(record, self.key_attributes) for record in records]
        # a request's spans share few keys: each one's owner hashed, and its part found, once
        owners: dict[str, tuple[int, Routed]] = {}
        now = self.clock()
        self._expire(now)
        for i, (record, found) in enumerate(zip(records, keys, strict=True)):
            trace_id = record.trace_id
            if found is None:
                process = self._trace_owner.get(trace_id)
                if process is None:
                    held = self._held.get(trace_id)
                    if held is None:
                        held = self._held[trace_id] = _Held(owner(trace_id, self.workers), now)
                    held.spans.append(record)
                    self.held_spans += 1
                    process = held.process
                target = part(process)
            else:
                known_owner = owners.get(found[0])
                if known_owner is None:
                    process = owner(found[0], self.workers)
                    known_owner = owners[found[0]] = (process, part(process))
                    known_owner[1].keys.append(found[0])
                process, target = known_owner
            target.records.append(record)
            if target.sizes is not None:  # a part with sizes: all of the request's are known
                target.sizes.append(known[i])
            if found is None or trace_id in self._trace_owner:
                continue
            self._remember(trace_id, process)
            waited = self._held.pop(trace_id, None)
            if waited is None:
                continue
            self.held_spans -= len(waited.spans)
            if waited.process != process:
                target.records.extend(waited.spans)
                target.sizes = None  # the store works out those of this part
                target.resent += len(waited.spans)
                part(waited.process).released.append(trace_id)
                self.moved_spans += len(waited.spans)
        return out

    def owner_of(self, record: Routable) -> int:
        """The process that holds ``record`` now, without routing it (a replacement process
        is given what its predecessor held)."""
        found = session_key(record, self.key_attributes)
        if found is not None:
            return owner(found[0], self.workers)
        process = self._trace_owner.get(record.trace_id)
        if process is None:
            held = self._held.get(record.trace_id)
            process = held.process if held is not None else owner(record.trace_id, self.workers)
        return process

    def decide(self, trace_ids: Sequence[str], process: int) -> list[bool]:
        """Whether ``process``, whose store closed these key-less traces, may judge each one
        alone: yes unless its spans moved to the owner of a key that arrived meanwhile."""
        answers = []
        for trace_id in trace_ids:
            held = self._held.pop(trace_id, None)
            if held is not None:
                self.held_spans -= len(held.spans)
                self._remember(trace_id, held.process)
                answers.append(held.process == process)
                continue
            owner = self._trace_owner.get(trace_id)
            answers.append(owner is None or owner == process)
        return answers

    def _remember(self, trace_id: str, process: int) -> None:
        self._trace_owner[trace_id] = process
        if len(self._trace_owner) > _MAX_TRACES:
            for _ in range(_MAX_TRACES // 4):
                self._trace_owner.popitem(last=False)

    def _expire(self, now: float) -> None:
        """Spans that waited too long stay where they are: their trace is their session."""
        while self._held:
            trace_id, held = next(iter(self._held.items()))
            if now - held.since < self.hold_s and self.held_spans <= self.max_held_spans:
                return
            del self._held[trace_id]
            self.held_spans -= len(held.spans)
            self._remember(trace_id, held.process)
