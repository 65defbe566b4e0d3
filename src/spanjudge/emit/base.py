"""The `Sink` protocol: where evaluated sessions go (OTLP spans and logs, metrics, reports)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from spanjudge.values import SessionResult


@runtime_checkable
class Sink(Protocol):
    """Receives every evaluated session. Called from one thread (the pipeline's owner).

    ``emit`` may raise; the pipeline logs it once and carries on with the next sink.
    ``flush`` returns False when it could not finish within ``timeout_s``.
    ``shutdown`` releases what the sink created itself, never providers it was given.
    """

    def emit(self, result: SessionResult) -> None: ...

    def flush(self, timeout_s: float) -> bool: ...

    def shutdown(self) -> None: ...
