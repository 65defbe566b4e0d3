"""The emit Protocols: `Sink`, where evaluated sessions go (OTLP spans and logs, metrics,
reports), and `SinkFactory`, what a plugin in the `spanjudge.sinks` entry-point group names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

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


class SinkFactory(Protocol):
    """Builds a sink from its options (``emit.sinks.<name>``); appends every configuration
    problem, with ``path``, to ``problems``."""

    def __call__(self, options: Mapping[str, Any], path: str, problems: list[str]) -> Sink: ...
