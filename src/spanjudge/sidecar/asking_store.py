"""The session store of an evaluation process (`serve.workers` > 1): a key-less trace it closes
as a session of its own is judged only if the serve process says its spans did not move.

A key-less span waits in the process its trace id hashes to; its trace's key may arrive at
the serve process and be owned by another process, which then gets the spans again
(`sidecar.routing`). If this process closed the trace meanwhile (its idle timeout, an eviction
over the memory budget, a lag behind intake), judging it here too would judge those spans
twice. So `close`, the one way sessions leave a store, asks the serve process about every
trace it closes alone (one question per tick that closes any), and drops those that moved: it
never judged them, and the other process will. A shutdown close asks nothing: once intake has
stopped nothing moves, and every move made before reached this process first.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from spanjudge.sessions.keys import TRACE_ID_SOURCE
from spanjudge.sessions.store import ClosedSession, ClosePolicy, SessionStore

if TYPE_CHECKING:
    from spanjudge.sessions.store import CloseReason


class Asker:
    """Questions to the serve process and their answers, matched by number; any thread."""

    def __init__(self, send: Callable[[tuple[object, ...]], None]) -> None:
        self._send = send
        self._answers: dict[int, list[bool]] = {}
        self._asked = 0
        self._cond = threading.Condition()

    def __call__(self, trace_ids: Sequence[str]) -> list[bool]:
        with self._cond:
            self._asked += 1
            number = self._asked
        self._send(("ask", number, list(trace_ids)))
        with self._cond:
            # Answered within a message round trip; the process ends if serve is gone.
            while number not in self._answers:
                self._cond.wait(1.0)
            return self._answers.pop(number)

    def answered(self, number: int, answers: list[bool]) -> None:
        with self._cond:
            self._answers[number] = answers
            self._cond.notify_all()


class AskingStore(SessionStore):
    def __init__(
        self,
        policy: ClosePolicy,
        clock: Callable[[], float],
        ask: Callable[[Sequence[str]], list[bool]],
    ) -> None:
        super().__init__(policy, clock)
        self._ask = ask
        self.moved_away = 0  # traces closed here whose spans another process judges

    def close(
        self, reason: CloseReason | None = None, *, limit: int | None = None
    ) -> list[ClosedSession]:
        closed = super().close(reason, limit=limit)
        if reason is not None:
            return closed
        alone = [c.key for c in closed if c.key_source == TRACE_ID_SOURCE]
        if not alone:
            return closed
        answers = dict(zip(alone, self._ask(alone), strict=True))
        kept = [c for c in closed if c.key_source != TRACE_ID_SOURCE or answers[c.key]]
        self.moved_away += len(closed) - len(kept)
        return kept
