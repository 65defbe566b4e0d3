"""How `spanjudge serve` stops: SIGTERM and SIGINT, waited for without taking a lock, and a
watchdog that ends a shutdown still running when its time is up.

Python runs a signal handler in the main thread between two bytecodes, also while that thread
holds a lock; a handler that takes a lock can then wait on its own thread forever. serve's
handler did: it called `threading.Event.set` while the main thread waited on that Event, and
`Event.wait` holds the Event's (non-reentrant) lock as it wakes up every half second. A SIGTERM
handled in that moment left serve running until its supervisor's SIGKILL, and the open
sessions the shutdown would have judged were judged only by the next start, if any.

Here the handler does nothing at all: the interpreter writes each signal's number to a pipe
(`signal.set_wakeup_fd`), and `StopSignals.wait` reads it.

Each shutdown step has its own bound, but a part that ignores it (a plugin sink's `shutdown`,
a thread that never ends and that the interpreter's exit waits for, an exit hook) would hold
the process until SIGKILL, the moment unknown. `end_by` ends the process a second after the
configured `serve.shutdown_timeout` instead, and the log says where it was stuck, with every
thread's stack.
"""

from __future__ import annotations

import contextlib
import faulthandler
import logging
import os
import select
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType, TracebackType

log = logging.getLogger("spanjudge.sidecar")

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def _noted(signum: int, frame: FrameType | None) -> None:
    """The handler: the signal's number is already on the wakeup pipe."""


class StopSignals:
    """Installs the handlers on enter (main thread only); `wait` says whether one arrived.

    The handlers stay installed after exit, as a plain ignore: a second SIGTERM while the
    interpreter exits after the shutdown must not kill it (exit status 0 is the contract)."""

    def __init__(self) -> None:
        self._received = False
        self._read = self._write = -1
        self._previous_fd = -1

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is not threading.main_thread():
            # what installing the handlers would raise, before any pipe is opened
            raise ValueError("signal only works in main thread of the main interpreter")
        self._read, self._write = os.pipe()
        try:
            os.set_blocking(self._read, False)
            os.set_blocking(self._write, False)
            self._poll = select.poll()  # not select(): any fd number
            self._poll.register(self._read, select.POLLIN)
            # The pipe before the handlers: a signal between the two would otherwise be lost.
            self._previous_fd = signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
        except BaseException:
            os.close(self._read)
            os.close(self._write)
            raise
        for signum in STOP_SIGNALS:
            signal.signal(signum, _noted)
        return self

    def wait(self, timeout_s: float) -> bool:
        """Whether SIGTERM or SIGINT arrived since enter, waiting up to ``timeout_s`` for one."""
        if not self._received and self._poll.poll(max(0, int(timeout_s * 1000))):
            self._received = self._drain()
        return self._received

    def _drain(self) -> bool:
        stop = False
        while True:
            try:
                numbers = os.read(self._read, 512)
            except BlockingIOError:
                return stop
            if not numbers:
                return stop
            stop = stop or any(n in STOP_SIGNALS for n in numbers)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        signal.set_wakeup_fd(self._previous_fd)
        os.close(self._read)
        os.close(self._write)


_LATE_S = 1.0  # past the budget: the shutdown keeps a margin of its own for the exit


def end_by(budget_s: float, code: int, where: Callable[[], str], fate: str) -> threading.Timer:
    """Exit with ``code`` a second after ``budget_s`` unless the process ended by then (or the
    returned timer was cancelled), saying in the log ``where()`` it was stuck, the threads still
    running, ``fate`` and every stack."""

    def end() -> None:
        main = threading.main_thread()
        running = [t.name for t in threading.enumerate() if t is not main and not t.daemon]
        log.error(
            "shutdown: not finished %gs after it began (serve.shutdown_timeout %gs); stuck %s%s;"
            " exiting now with status %d: %s; the stacks follow",
            budget_s + _LATE_S,
            budget_s,
            where(),
            f" (threads still running: {', '.join(running)})" if running else "",
            code,
            fate,
        )
        with contextlib.suppress(Exception):  # no usable stderr: the exit matters more
            faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        os._exit(code)

    timer = threading.Timer(budget_s + _LATE_S, end)
    timer.name = "spanjudge-shutdown-watchdog"
    timer.daemon = True  # never what the exit waits for
    timer.start()
    return timer
