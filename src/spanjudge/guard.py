"""The one internal-error guard: log once per place, count every occurrence, re-raise under tests.

spanjudge must never raise into the agent, never take the sidecar down, and never let one odd
span or session cost the others; so the places that contain failures (the pipeline, the engine's
evaluator wrapper, the recognition pass, the processor, the sidecar's worker) call
`Guard.failed` from their ``except`` block. In production that logs the traceback the first time
a place fails, counts every failure in `Guard.errors` (and in ``spanjudge.internal_errors`` where
the owner has telemetry) and carries on. Under the test suite (`RAISE_ENV` set, as
`tests/conftest.py` does) it re-raises instead, so a regression a guard would hide fails its test;
a test that makes something fail on purpose opts out with `contained()`.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

RAISE_ENV = "SPANJUDGE_RAISE_INTERNAL_ERRORS"
_contained_depth = 0


def raising() -> bool:
    """Whether guards re-raise: under the test suite, unless a test opted out."""
    return _contained_depth == 0 and os.environ.get(RAISE_ENV, "") not in ("", "0")


@contextmanager
def contained() -> Iterator[None]:
    """Guards contain failures inside this block even under the test suite: for tests that
    make an evaluator, a recogniser, a sink or a sidecar step fail on purpose (process-wide,
    so threads the block starts are covered too)."""
    global _contained_depth
    _contained_depth += 1
    try:
        yield
    finally:
        _contained_depth -= 1


class Guard:
    """One owner's failures: ``errors`` counts them, the first per ``where`` is logged with its
    traceback, ``on_error(where)`` sees each (for a metric). ``logger`` is a logger or its name."""

    def __init__(
        self,
        logger: logging.Logger | str,
        what: str,
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        self.log = logging.getLogger(logger) if isinstance(logger, str) else logger
        self.what = what
        self.on_error = on_error
        self.errors = 0
        self._warned: set[str] = set()
        # Two threads failing in one place at once: one logs it, both are counted.
        self._lock = threading.Lock()

    def failed(self, where: str, detail: str = "") -> None:
        """Call from an ``except`` block: the exception being handled is the failure."""
        with self._lock:
            self.errors += 1
            first = where not in self._warned
            self._warned.add(where)
        try:
            if self.on_error is not None:
                self.on_error(where)
        except Exception:  # a failing metric must not cost the log line
            pass
        try:
            if first:
                suffix = f" on {detail}" if detail else ""
                self.log.exception(
                    "%s %s failed%s (logged once, every occurrence counted)",
                    self.what,
                    where,
                    suffix,
                )
        except Exception:  # telemetry or logging itself failed: nothing safe is left to do
            pass
        if raising():
            raise
