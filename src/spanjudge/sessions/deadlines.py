"""Keys ordered by the earliest time they may be due: a min-heap with lazy invalidation.

A tick looks only at the entries whose time has come, so its cost is O(k log n) for k due keys
rather than a scan of every open session. Moving a key's time rewrites nothing in place: the
new entry is pushed and the old one is skipped when it surfaces (and dropped in a rebuild once
skipped entries outnumber the live ones).
"""

from __future__ import annotations

import heapq

# Rebuild the heap when it holds more than this many entries per live key (plus a floor, so
# small stores do not rebuild on every change).
_STALE_FACTOR = 2
_STALE_FLOOR = 64


class DeadlineQueue:
    """Each key has at most one live entry ``(at, order)``; ``order`` sorts keys due together."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, str]] = []
        self._live: dict[str, tuple[float, int]] = {}

    def __len__(self) -> int:
        return len(self._live)

    def schedule(self, key: str, order: int, at: float) -> None:
        """``key`` may be due from ``at`` on (replacing any earlier entry of it)."""
        self._live[key] = (at, order)
        heapq.heappush(self._heap, (at, order, key))
        self._compact()

    def lower(self, key: str, at: float) -> None:
        """``key`` may now be due as early as ``at``: moves its entry only if that is sooner."""
        live = self._live.get(key)
        if live is not None and at < live[0]:
            self.schedule(key, live[1], at)

    def discard(self, key: str) -> None:
        if self._live.pop(key, None) is not None:
            self._compact()

    def clear(self) -> None:
        self._heap.clear()
        self._live.clear()

    def pop_due(self, now: float) -> list[tuple[int, str]]:
        """Removes and returns ``(order, key)`` for every live entry with ``at <= now``."""
        heap = self._heap
        live = self._live
        out: list[tuple[int, str]] = []
        while heap and heap[0][0] <= now:
            at, order, key = heapq.heappop(heap)
            if live.get(key) == (at, order):
                del live[key]
                out.append((order, key))
        return out

    def _compact(self) -> None:
        if len(self._heap) > _STALE_FACTOR * len(self._live) + _STALE_FLOOR:
            self._heap = [(at, order, key) for key, (at, order) in self._live.items()]
            heapq.heapify(self._heap)
