"""What `serve` says about verdicts: one INFO line per interval, and at DEBUG one per session.

    judged 12 sessions in the last 60s: skill_loaded 10 pass 2 fail 0 n/e, cost 12 pass ...;
    3 open, the oldest for 45s; verdict export ok

A sink like any other (it sees every evaluated session, whichever process evaluated it), with a
thread of its own for the interval: a quiet interval is logged too, since "nothing judged while
sessions stay open" is what an operator looks for.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from spanjudge.emit.console import console_line
from spanjudge.sessions.store import SessionStore
from spanjudge.values import SessionResult

log = logging.getLogger("spanjudge.sidecar")

INTERVAL_S = 60.0
_OUTCOMES = ("pass", "fail", "not_evaluated")


def open_in(store: SessionStore) -> tuple[int, float | None] | None:
    """A store's open sessions and the oldest one's age in seconds, read from another thread
    than the store's (a session opening meanwhile just skips a beat: None)."""
    try:
        oldest = next(iter(store.open.values()), None)
        count = len(store.open)
    except RuntimeError:
        return None
    return count, None if oldest is None else store.clock() - oldest.first_seen


class Judged:
    """What the interval line counts of some judged sessions: how many, and their verdicts by
    evaluator and outcome (an evaluation process of `serve.workers` > 1 counts its own and
    sends them to serve's line)."""

    __slots__ = ("counts", "sessions")

    def __init__(self) -> None:
        self.sessions = 0
        self.counts: dict[str, dict[str, int]] = {}

    def add(self, result: SessionResult) -> None:
        self.sessions += 1
        by_evaluator = self.counts
        for verdict in result.verdicts:
            counts = by_evaluator.get(verdict.evaluator)
            if counts is None:  # not `setdefault`: its default would be built per verdict
                counts = by_evaluator[verdict.evaluator] = dict.fromkeys(_OUTCOMES, 0)
            counts[verdict.outcome] += 1


def log_judged(result: SessionResult) -> None:
    """The DEBUG line of one judged session (logged where it was judged)."""
    if log.isEnabledFor(logging.DEBUG):
        log.debug("%s", console_line(result).removeprefix("spanjudge: "))


class SummaryLog:
    """Counts what was judged; `log_interval` logs it and starts the next interval.

    ``open_sessions`` gives the open sessions' count and the oldest one's age in seconds (None
    when not known), ``export_state`` a few words on verdict export."""

    def __init__(
        self,
        open_sessions: Callable[[], tuple[int, float | None] | None],
        export_state: Callable[[], str],
        interval_s: float = INTERVAL_S,
    ) -> None:
        self._open_sessions = open_sessions
        self._export_state = export_state
        self.interval_s = interval_s
        self._lock = threading.Lock()
        self._judged = Judged()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- Sink: the worker's thread ---

    def emit(self, result: SessionResult) -> None:
        with self._lock:
            self._judged.add(result)
        log_judged(result)

    def add(self, judged: Judged) -> None:
        """Count sessions judged elsewhere (their DEBUG lines were logged there)."""
        with self._lock:
            mine = self._judged
            mine.sessions += judged.sessions
            for evaluator, counts in judged.counts.items():
                into = mine.counts.setdefault(evaluator, dict.fromkeys(_OUTCOMES, 0))
                for outcome, n in counts.items():
                    into[outcome] += n

    def flush(self, timeout_s: float) -> bool:
        return True

    def shutdown(self) -> None:
        self._stop.set()

    # --- the interval ---

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="SpanJudgeSummary", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.log_interval()
            except Exception:  # a summary line is not worth the sidecar
                log.debug("summary line failed", exc_info=True)

    def log_interval(self) -> None:
        """Log the interval's line and start counting the next."""
        with self._lock:
            judged, self._judged = self._judged, Judged()
        sessions, counts = judged.sessions, judged.counts
        if sessions:
            said = f"judged {sessions} session{'s' if sessions != 1 else ''}"
            per = ", ".join(
                f"{name} {c['pass']} pass {c['fail']} fail {c['not_evaluated']} n/e"
                for name, c in counts.items()
            )
            parts = [f"{said} in the last {self.interval_s:g}s: {per}"]
        else:
            parts = [f"no session judged in the last {self.interval_s:g}s"]
        open_now = self._open_sessions()
        if open_now is not None:
            count, oldest_s = open_now
            oldest = f", the oldest for {oldest_s:.0f}s" if count and oldest_s is not None else ""
            parts.append(f"{count} open{oldest}")
        parts.append(f"verdict export {self._export_state()}")
        log.info("%s", "; ".join(parts))
