"""How far evaluation lags behind intake, for the receivers' backpressure.

A request is *lagging* from the moment it is accepted until a tick has taken its spans through
closing and evaluation (queued, or added to the store and not yet ticked; a session that stays
open for its idle timeout or end grace is not lag). Two figures bound it, each against
`serve.max_pending_age_s`: the age of the oldest lagging request, and the time evaluation needs
for the spans lagging now at the rate it has been measured to take them. The second one refuses
before the first is reached: when intake runs four times faster than evaluation, a backlog that
took five seconds to accept takes twenty to judge, and the age alone would only see it late.

`LagMeter` is not thread-safe: the owner calls it under its submit lock, except `busy` and
`sample`, which only the worker thread calls.
"""

from __future__ import annotations

import collections

_SMOOTHING = 0.3  # weight of the newest throughput sample
_MIN_SAMPLE_S = 0.05  # busy time a sample needs to say anything
_MIN_CYCLE_SPANS = 256


class LagMeter:
    def __init__(self) -> None:
        # (spool id, spans, accepted at, body bytes) of each lagging request, oldest first
        self._lagging: collections.deque[tuple[int, int, float, int]] = collections.deque()
        self.spans = 0  # spans of the lagging requests
        self.bytes = 0  # their request bodies' bytes (`serve.max_pending_bytes`)
        # spans per second a busy worker takes through add and tick (None until measured)
        self.rate: float | None = None
        self._busy_s = 0.0
        self._done = 0
        self._sampled_at: float | None = None
        self._was_behind = False

    def accepted(self, request_id: int, spans: int, now: float, nbytes: int = 0) -> None:
        self._lagging.append((request_id, spans, now, nbytes))
        self.spans += spans
        self.bytes += nbytes

    def caught_up(self, mark: int) -> None:
        """Every request up to spool id ``mark`` went through a tick."""
        lagging = self._lagging
        while lagging and lagging[0][0] <= mark:
            _, spans, _, nbytes = lagging.popleft()
            self._done += spans
            self.spans -= spans
            self.bytes -= nbytes

    def clear(self) -> None:
        self._lagging.clear()
        self.spans = 0
        self.bytes = 0

    def oldest_age_s(self, now: float) -> float:
        return now - self._lagging[0][2] if self._lagging else 0.0

    def expected_wait_s(self) -> float:
        """Seconds evaluation needs for the lagging spans at the measured rate (0 unknown)."""
        return self.spans / self.rate if self.rate else 0.0

    def busy(self, seconds: float) -> None:
        self._busy_s += seconds

    def sample(self, now: float, *, behind: bool) -> None:
        """After a tick: fold in the spans caught up since the last sample, per second of wall
        time when the worker was ``behind`` all along (work left at the last sample: the drain
        rate, every cost included), else per second the worker was busy.

        A tick that caught nothing up while work waits ends no sample: the stretch goes on,
        and the sample that catches up covers all of it. Otherwise a backlog taken at once
        after a stall (a flood request waits for its last session to close) would count as
        taken in the last tick's time alone, and the lag would look many times shorter."""
        if not self._done and behind:
            return
        if self._was_behind and self._sampled_at is not None:
            elapsed = now - self._sampled_at
        else:
            elapsed = self._busy_s
        if self._done and elapsed < _MIN_SAMPLE_S:
            return  # too short to say anything: keep counting
        if self._done:
            observed = self._done / elapsed
            self.rate = (
                observed
                if self.rate is None
                else _SMOOTHING * observed + (1 - _SMOOTHING) * self.rate
            )
        self._done, self._busy_s = 0, 0.0
        self._sampled_at, self._was_behind = now, behind

    def cycle_spans(self, seconds: float) -> int:
        """Spans to add before the next tick, so that a cycle (add, then close and evaluate
        what closed) takes about ``seconds``: verdicts leave steadily, not in long bursts."""
        if self.rate is None:
            return _MIN_CYCLE_SPANS
        return max(_MIN_CYCLE_SPANS, int(self.rate * seconds))
