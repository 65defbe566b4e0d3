"""Memory a piece of work leaves allocated (tracemalloc)."""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable


def bytes_kept(work: Callable[[], object]) -> int:
    """Bytes still allocated after ``work()`` has run and garbage has been collected."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        work()
        gc.collect()
        return int(tracemalloc.get_traced_memory()[0] - before)
    finally:
        tracemalloc.stop()
