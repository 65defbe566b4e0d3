"""Loggers made on first use, with the command line's set-up applied then.

`import logging` (with `traceback`, `threading`, `string`) costs a `spanjudge eval` of a small
file about a twentieth of its start-up (`bench/bench_startup.py`), and a run that logs nothing
need not pay it. Code on the eval path asks `logger(name)` when it has something to log; the
CLI registers its set-up (`on_first_use`) instead of importing `logging` up front.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import logging

_setup: list[Callable[[], None]] = []


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

    while _setup:
        _setup.pop(0)()
    return logging.getLogger(name)
