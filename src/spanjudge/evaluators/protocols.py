"""The evaluator extension point's Protocols (ARCHITECTURE.md section 13): `Evaluator`, and
`EvaluatorFactory`, what a plugin in the `spanjudge.evaluators` entry-point group names.

A Protocol needs `typing`, which `spanjudge eval` does not import (start-up,
`bench/bench_startup.py`): the modules a run imports name these for type checkers only, and
`spanjudge.evaluators.base` still answers for both (imported from here when first asked).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from collections.abc import Mapping

    from spanjudge.evaluators.base import EvaluationContext
    from spanjudge.values import Verdict


@runtime_checkable
class Evaluator(Protocol):
    """Judges one aspect of a session. Must return at least one verdict; may raise (the engine
    turns an exception into a `not_evaluated` verdict with ``error.type``)."""

    name: str

    def evaluate(self, ctx: EvaluationContext) -> list[Verdict]: ...


class EvaluatorFactory(Protocol):
    """Builds an evaluator from its options (``evaluators.<name>`` in the configuration, less
    ``enabled`` and ``judge``); appends every configuration problem, with ``path``, to
    ``problems`` instead of raising. Third-party factories register in the `spanjudge.evaluators`
    entry-point group."""

    def __call__(self, options: Mapping[str, Any], path: str, problems: list[str]) -> Evaluator: ...
