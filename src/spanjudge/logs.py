"""Loggers made on first use, with the command line's set-up applied then.

`import logging` (with `traceback`, `threading`, `string`) costs a `spanjudge eval` of a small
file about a twentieth of its start-up (`bench/bench_startup.py`), and a run that logs nothing
need not pay it. Code on the eval path asks `logger(name)` when it has something to log; the
CLI registers its set-up (`on_first_use`) instead of importing `logging` up front.

Code that does not ask (a plugin, a judge's client library) may import `logging` itself and log
straight away: its records would then reach `logging`'s last-resort handler, bare, without the
CLI's format. So until the set-up has run, the first import of `logging`, by anyone, runs it.
"""

from __future__ import annotations

import sys
from _thread import RLock  # threading's RLock, without importing threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import logging

_setup: list[Callable[[], None]] = []
# Threads logging for the first time at once (judges, the processor's) wait for the set-up:
# none may log before it is done, or take a set-up another thread already took.
_lock = RLock()
_running = 0  # set-ups under way (a set-up may itself ask for a logger: the lock is re-entrant)


def on_first_use(setup: Callable[[], None]) -> None:
    """Run ``setup`` once, before the next logger is handed out (or right after `logging` is
    first imported, if that comes first)."""
    _setup.append(setup)
    if "logging" not in sys.modules and _HOOK not in sys.meta_path:
        sys.meta_path.insert(0, _HOOK)


def cancel(setup: Callable[[], None]) -> None:
    """Drop ``setup`` if it has not run (the command that registered it is over)."""
    while setup in _setup:
        _setup.remove(setup)
    if not _setup and _HOOK in sys.meta_path:
        sys.meta_path.remove(_HOOK)


class _ThenSetUp:
    """`logging`'s own loader, running the pending set-up once the module is there."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader

    def __getattr__(self, name: str) -> Any:  # get_source (tracebacks), get_resource_reader...
        return getattr(self.loader, name)

    def create_module(self, spec: Any) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self.loader.exec_module(module)
        logger("spanjudge")


class _OnImport:
    """A `sys.meta_path` entry that finds nothing itself: it wraps the loader of `logging`."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "logging":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)  # once; and the finders below do the finding
        from importlib.util import find_spec

        spec = find_spec(name)
        if spec is None or spec.loader is None or not _setup:
            return spec
        spec.loader = _ThenSetUp(spec.loader)  # type: ignore[assignment]
        return spec


_HOOK = _OnImport()


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
