"""`python -m tests.sidecar.signal_at_wait SIGNAL serve-args...`: `spanjudge serve`, which sends
itself SIGNAL at the moments a signal is the most dangerous to its main thread: right after
that thread took a lock or came back from a wait, at each of the next `SENDS` times it does
once the test created ``<ready-file>.go`` (after it sent what the shutdown is to judge).

A signal sent from outside arrives there only now and then (a hang once in many loaded CI
runs); a profile hook makes it arrive there every time. The hook appends to
``<ready-file>.sent`` the call each signal followed, so that the test knows they were sent."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import Any

from spanjudge.sidecar import main

# C calls after which the main thread holds a lock, or has just stopped waiting
_WAITS = {"acquire", "__enter__", "select", "poll", "sleep", "wait"}
SENDS = 5  # a stop signal, then more (a supervisor's, a second Ctrl-C) while serve stops


def _hook(ready: Path, signum: int) -> Any:
    go = ready.with_name(ready.name + ".go")
    sent = ready.with_name(ready.name + ".sent")
    count = 0

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal count
        if event != "c_return" or getattr(arg, "__name__", "") not in _WAITS:
            return
        if not go.exists():
            return
        count += 1
        if count == SENDS:
            sys.setprofile(None)
        with sent.open("a") as note:
            note.write(arg.__qualname__ + "\n")
        os.kill(os.getpid(), signum)  # handled at this thread's next bytecode boundary

    return profile


def run(argv: list[str]) -> int:
    signum = signal.Signals[argv[0]]
    args = argv[1:]
    ready = Path(args[args.index("--ready-file") + 1])
    sys.setprofile(_hook(ready, signum))  # this (the main) thread only
    return main(args)


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
