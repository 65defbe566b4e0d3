"""`faster_init` keeps a dataclass's construction as it was: parameters, defaults, default
factories, errors, frozenness (compared with the `__init__` dataclasses generates)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from spanjudge.recognition.evidence import ToolFacts
from spanjudge.trajectory.slot_init import faster_init
from spanjudge.trajectory.steps import Step
from spanjudge.values import Verdict


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Generated:
    a: str
    b: int = 3
    c: dict[str, Any] = dataclasses.field(default_factory=dict)
    d: tuple[str, ...] = ()


@faster_init
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Faster:
    a: str
    b: int = 3
    c: dict[str, Any] = dataclasses.field(default_factory=dict)
    d: tuple[str, ...] = ()


@faster_init
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Checked:
    n: int

    def __post_init__(self) -> None:
        if self.n < 0:
            raise ValueError("n must not be negative")


def test_post_init_still_runs() -> None:
    assert Checked(n=1).n == 1
    with pytest.raises(ValueError, match="negative"):
        Checked(n=-1)
    with pytest.raises(ValueError, match="needs a reason"):
        Verdict(evaluator="e", outcome="not_evaluated", score=None, label="x", explanation="")


def fields_of(obj: Any) -> dict[str, Any]:
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}


@pytest.mark.parametrize(
    "kwargs", [{"a": "x"}, {"a": "x", "b": 5}, {"a": "x", "c": {"k": 1}, "d": ("y",)}]
)
def test_same_values_and_fresh_default_factories(kwargs: dict[str, Any]) -> None:
    assert fields_of(Faster(**kwargs)) == fields_of(Generated(**kwargs))
    assert Faster(a="x").c is not Faster(a="x").c  # a new dict each time


@pytest.mark.parametrize("args, kwargs", [((), {}), ((), {"a": "x", "zz": 1}), (("x",), {})])
def test_same_errors(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    with pytest.raises(TypeError) as generated:
        Generated(*args, **kwargs)
    with pytest.raises(TypeError) as faster:
        Faster(*args, **kwargs)
    assert str(faster.value) == str(generated.value).replace("Generated", "Faster")


def test_still_frozen_and_replace_works() -> None:
    step = Step(kind="tool_call", name="read_csv", span_id="s1", trace_id="t1")
    with pytest.raises(dataclasses.FrozenInstanceError):
        step.name = "other"  # type: ignore[misc]
    moved = dataclasses.replace(step, turn=2)
    assert (moved.turn, moved.name, moved.tool_schemas) == (2, "read_csv", {})
    assert moved == dataclasses.replace(moved)
    assert ToolFacts(tool="x").tool_schemas == {}
