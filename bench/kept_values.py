"""What building the values spanjudge keeps costs, whatever the code that fills them in does:
the budget lines of `bench_collector.py` and `bench_offline.py`.

The values are frozen dataclasses (the house style): each span's `SpanRecord` (with its events
and links), and each evaluated session's steps, turns, verdicts, trajectory, coverage and
result as the engine made them. A value two sessions share (a fixed `not_evaluated` verdict,
an empty expectation) is built once, so it is left out. Each value is built again from its own
fields, the best of three passes. That is a lower bound of what they cost where they are made:
each copy is freed at once (no collector pressure) and the loop keeps the caches warm.
"""

from __future__ import annotations

import collections
import dataclasses
import time
from collections.abc import Iterable
from typing import Any


def _collect(value: Any, found: dict[int, Any]) -> None:
    """``value`` and every dataclass instance it holds (in fields, tuples and lists), by id."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if id(value) in found:
            return
        found[id(value)] = value
        for item in dataclasses.fields(value):
            _collect(getattr(value, item.name), found)
    elif isinstance(value, (tuple, list)):
        for item in value:
            _collect(item, found)


def build_seconds(records: Iterable[Any], results: Iterable[Any]) -> float:
    """CPU seconds to build again the values of ``records`` (span records) and ``results``
    (`SessionResult`s), those shared by two results left out."""
    values: dict[int, Any] = {}
    for record in records:
        _collect(record, values)
    seen: collections.Counter[int] = collections.Counter()
    each: list[dict[int, Any]] = []
    for result in results:
        found: dict[int, Any] = {}
        _collect(result, found)
        seen.update(found.keys())
        each.append(found)
    for found in each:
        values.update((key, value) for key, value in found.items() if seen[key] == 1)
    built = [
        (
            type(value),
            {f.name: getattr(value, f.name) for f in dataclasses.fields(value) if f.init},
        )
        for value in values.values()
    ]
    best = float("inf")
    for _ in range(3):
        started = time.process_time()
        for kind, fields in built:
            kind(**fields)
        best = min(best, time.process_time() - started)
    return best
