"""The recogniser extension point's Protocols (ARCHITECTURE.md section 13): `Recogniser`,
`SessionFinaliser` (a recogniser's optional second pass), and `RecogniserFactory`, what a plugin
in the `spanjudge.recognisers` entry-point group names.

A Protocol needs `typing`, which `spanjudge eval` does not import (start-up,
`bench/bench_startup.py`): the modules a run imports name these for type checkers only, and
`spanjudge.recognition.base` still answers for the first two (imported from here when first
asked).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from collections.abc import Sequence

    from spanjudge.spans.record import SpanRecord
    from spanjudge.trajectory.steps import Step


@runtime_checkable
class Recogniser(Protocol):
    """Turns one span into steps. ``None`` means "not mine, try the next preset"."""

    name: str

    def recognise(self, span: SpanRecord) -> list[Step] | None: ...


@runtime_checkable
class SessionFinaliser(Protocol):
    """Optional second pass over a whole session (for facts spread over several spans)."""

    def finalise(self, steps: list[Step], spans: Sequence[SpanRecord]) -> list[Step]: ...


class RecogniserFactory(Protocol):
    """Builds a recogniser (a preset class is one). Third-party factories register in the
    `spanjudge.recognisers` entry-point group and are tried before the built-ins: a plugin
    exists to read what the built-in presets misread."""

    def __call__(self) -> Recogniser: ...
