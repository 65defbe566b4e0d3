"""The extension Protocols live in each package's `protocols` module (a Protocol needs `typing`,
which a run does not import); the modules ARCHITECTURE.md section 13 names still give them, and
they are the same runtime-checkable classes."""

from __future__ import annotations

import importlib
from collections.abc import Sequence

import pytest

import spanjudge
from spanjudge.recognition.registry import RecogniserRegistry
from spanjudge.spans.record import SpanRecord
from spanjudge.trajectory.steps import Step

# documented home -> (module the class is defined in, names)
HOMES = {
    "spanjudge.evaluators.base": (
        "spanjudge.evaluators.protocols",
        ("Evaluator", "EvaluatorFactory"),
    ),
    "spanjudge.recognition.base": (
        "spanjudge.recognition.protocols",
        ("Recogniser", "SessionFinaliser"),
    ),
    "spanjudge.judges.base": ("spanjudge.judges.protocols", ("Judge", "JudgeKind")),
    "spanjudge.judges": ("spanjudge.judges.protocols", ("Judge", "JudgeKind")),
}


@pytest.mark.parametrize("home", sorted(HOMES))
def test_the_documented_modules_give_the_protocols(home: str) -> None:
    defining, names = HOMES[home]
    for name in names:
        assert getattr(importlib.import_module(home), name) is getattr(
            importlib.import_module(defining), name
        )
        # `from <home> import <name>` goes through the same module __getattr__
        namespace: dict[str, object] = {}
        exec(f"from {home} import {name}", namespace)
        assert namespace[name] is getattr(importlib.import_module(defining), name)


def test_the_public_api_gives_the_same_classes() -> None:
    from spanjudge.evaluators.base import Evaluator
    from spanjudge.judges.base import Judge
    from spanjudge.recognition.base import Recogniser

    assert (spanjudge.Evaluator, spanjudge.Judge, spanjudge.Recogniser) == (
        Evaluator,
        Judge,
        Recogniser,
    )


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    import spanjudge.evaluators.base as base

    with pytest.raises(
        AttributeError, match=r"spanjudge\.evaluators\.base'.* no attribute 'Evaluatr'"
    ):
        base.Evaluatr  # noqa: B018
    with pytest.raises(ImportError):
        exec("from spanjudge.judges import Judgee", {})


def test_duck_typed_extensions_are_instances_as_before() -> None:
    class Plain:
        name = "plain"

        def evaluate(self, ctx: object) -> list[object]:
            return []

        def judge(self, request: object) -> object:
            return None

        def recognise(self, span: object) -> None:
            return None

    assert isinstance(Plain(), spanjudge.Evaluator)
    assert isinstance(Plain(), spanjudge.Judge)
    assert isinstance(Plain(), spanjudge.Recogniser)
    assert not isinstance(object(), spanjudge.Evaluator)


class _Reads:
    name = "reads"

    def recognise(self, span: SpanRecord) -> list[Step] | None:
        return None


class _Finalises(_Reads):
    name = "finalises"

    def finalise(self, steps: list[Step], spans: Sequence[SpanRecord]) -> list[Step]:
        return steps


class _SwitchedOff(_Reads):
    name = "switched_off"
    finalise = None


def test_the_registry_finalises_with_what_the_protocol_would_take() -> None:
    from spanjudge.recognition.base import SessionFinaliser

    presets = [_Reads(), _Finalises(), _SwitchedOff()]
    registry = RecogniserRegistry(presets)
    taken = [r.name for r in registry.finalisers]  # type: ignore[attr-defined]
    assert taken == ["finalises"]
    assert taken == [r.name for r in presets if isinstance(r, SessionFinaliser)]


def test_the_judge_kinds_are_the_literal_type_checkers_read() -> None:
    import typing

    from spanjudge.judges.base import JUDGE_KINDS, JudgeKind

    assert typing.get_args(JudgeKind) == JUDGE_KINDS
