"""Loggers made on first use, with the command line's set-up applied then.

`import logging` (with `traceback`, `threading`, `string`) costs a `spanjudge eval` of a small
file about a twentieth of its start-up (`bench/bench_startup.py`), and a run that logs nothing
need not pay it. Code on the eval path asks `logger(name)` when it has something to log; the
CLI registers its set-up (`on_first_use`) instead of importing `logging` up front.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import logging

_setup: list[Callable[[], None]] = []
# Threads logging for the first time at once (judges, the processor's) wait for the set-up:
# none may log before it is done, or take a set-up another thread already took.
_lock = threading.RLock()
_running = 0  # set-ups under way (a set-up may itself ask for a logger: the lock is re-entrant)


def on_first_use(setup: Callable[[], None]) -> None:
    """Run ``setup`` once, before the next logger is handed out."""
    _setup.append(setup)


def cancel(setup: Callable[[], None]) -> None:
    """Drop ``setup`` if it has not run (the command that registered it is over)."""
    while setup in _setup:
        _setup.remove(setup)


def logger(name: str) -> logging.Logger:
    """`logging.getLogger(name)`, after any pending set-up."""
    import logging

    global _running
    if _setup or _running:
        with _lock:
            _running += 1
            try:
                while _setup:
                    _setup.pop(0)()
            finally:
                _running -= 1
    return logging.getLogger(name)
