"""`spanjudge.records.record` behaves as `dataclasses.dataclass` on the same class bodies, for
every option set spanjudge uses: construction (signature, defaults, factories, errors,
``__post_init__``), eq/hash/repr, frozen errors, replace, fields, pickling, copying, slots; and
`spanjudge eval` of a small file no longer imports `dataclasses` or `inspect` (start-up)."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import math
import pickle
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spanjudge import records
from spanjudge.recognition.evidence import ToolFacts
from spanjudge.record_init import COMPILE_AFTER
from spanjudge.trajectory.steps import Step
from spanjudge.values import Verdict
from tests.conftest import FIXTURES
from tests.support.startup import modules_after, run_isolated

# The option sets of src's decorators.
OPTIONS = {
    "frozen_slots_kw": {"frozen": True, "slots": True, "kw_only": True},
    "slots": {"slots": True},
    "frozen_slots": {"frozen": True, "slots": True},
    "no_eq": {"eq": False},
}


def _check(self: Any) -> None:
    if self.b < 0:
        raise ValueError("b must not be negative")


def _body(field: Any, name: str, post_init: bool) -> dict[str, Any]:
    body: dict[str, Any] = {
        "__module__": __name__,
        "__qualname__": name,
        "__annotations__": {
            "a": "str",
            "b": "int",
            "c": "dict[str, Any]",
            "d": "tuple[str, ...]",
            "e": float,
            "f": "Any",
        },
        "b": 3,
        "c": field(default_factory=dict),
        "d": (),
        "e": field(default=0.5),
        "f": None,
        "total": lambda self: self.b + len(self.d),
    }
    if post_init:
        body["__post_init__"] = _check
    return body


def _pair(key: str, post_init: bool = False, tag: str = "") -> tuple[type, type]:
    """The same class body made twice: by `dataclasses.dataclass` and by `records.record`; both
    put in this module (pickle finds classes by name)."""
    made = []
    for kind, decorate, field in (
        ("D", dataclasses.dataclass, dataclasses.field),
        ("R", records.record_class, records.field),
    ):
        name = f"{kind}_{key}{'_post' if post_init else ''}{tag}"
        cls = decorate(**OPTIONS[key])(type(name, (), _body(field, name, post_init)))
        globals()[name] = cls
        made.append(cls)
    return made[0], made[1]


PAIRS = {key: _pair(key) for key in OPTIONS}
POST = {key: _pair(key, post_init=True) for key in OPTIONS}


def _same(text_d: str, text_r: str) -> None:
    assert text_r == text_d.replace("D_", "R_")


def _outcome(call: Any) -> tuple[str, str]:
    try:
        return ("ok", repr(call()))
    except Exception as exc:  # the error a user sees, compared between the two
        return (type(exc).__name__, str(exc))


@pytest.mark.parametrize("key", OPTIONS)
def test_init_signature_doc_and_match_args(key: str) -> None:
    d, r = PAIRS[key]
    _same(str(inspect.signature(d)), str(inspect.signature(r)))
    _same(d.__doc__, r.__doc__)
    assert r.__match_args__ == d.__match_args__
    assert r.__init__.__qualname__ == d.__init__.__qualname__.replace("D_", "R_")


ARGS = [
    ((), {}),
    ((), {"a": "x"}),
    ((), {"a": "x", "zz": 1}),
    (("x",), {}),
    (("x", 1, {}, (), 1.0, None, 7), {}),
    (("x",), {"a": "y"}),
    ((), {"a": "x", "b": -1}),
]


@pytest.mark.parametrize("key", OPTIONS)
@pytest.mark.parametrize("post_init", [False, True])
@pytest.mark.parametrize("args, kwargs", ARGS)
def test_construction_and_its_errors(
    key: str, post_init: bool, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    # Fresh classes: a record's first instances go through the shared __init__ (record_init),
    # later ones through the compiled one; both must give what dataclasses gives.
    d, r = _pair(key, post_init, tag="_fresh")
    made_d = _outcome(lambda: d(*args, **kwargs))
    for _ in range(COMPILE_AFTER + 2):
        made_r = _outcome(lambda: r(*args, **kwargs))
        _same(made_d[1], made_r[1])
        assert made_r[0] == made_d[0]
    assert "__init__" in vars(r)  # compiled by now (or at the first call it could not bind)


@pytest.mark.parametrize("key", OPTIONS)
def test_default_factories_run_per_instance(key: str) -> None:
    r = PAIRS[key][1]
    one, two = r(a="x"), r(a="x")
    assert one.c == {} and one.c is not two.c
    assert (one.b, one.d, one.e, one.f, one.total()) == (3, (), 0.5, None, 3)


values = st.fixed_dictionaries(
    {
        "a": st.text(max_size=5),
        "b": st.integers(-3, 3),
        "c": st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
        "d": st.lists(st.text(max_size=2), max_size=2).map(tuple),
        "e": st.floats(allow_nan=True),
        "f": st.one_of(st.none(), st.integers(), st.sampled_from([math.nan])),
    }
)


@pytest.mark.parametrize("key", OPTIONS)
@given(one=values, two=values)
def test_eq_hash_repr_as_dataclasses(key: str, one: dict[str, Any], two: dict[str, Any]) -> None:
    d, r = PAIRS[key]
    d1, d2, r1, r2 = d(**one), d(**two), r(**one), r(**two)
    _same(repr(d1), repr(r1))
    assert (r1 == r2, r1 == r1, r1 != r2) == (d1 == d2, d1 == d1, d1 != d2)
    assert (r1 == d1) is False  # another class
    hashable = {**one, "c": None}
    hash_d, hash_r = _outcome(lambda: hash(d(**hashable))), _outcome(lambda: hash(r(**hashable)))
    if key != "no_eq":  # else both are object's hash, by identity
        _same(hash_d[1], hash_r[1])  # the same number, or the same "unhashable type" error
    assert hash_r[0] == hash_d[0]
    assert (r.__hash__ is None) == (d.__hash__ is None)


def test_repr_of_a_cycle() -> None:
    d, r = PAIRS["slots"]
    dd, rr = d(a="x"), r(a="x")
    dd.f, rr.f = dd, rr
    _same(repr(dd), repr(rr))
    assert repr(rr).endswith("f=...)")


@pytest.mark.parametrize("key", ["frozen_slots_kw", "frozen_slots"])
def test_frozen_assignment_and_deletion(key: str) -> None:
    d, r = PAIRS[key]
    # "zz" (no such field): Python 3.11's dataclass raises a TypeError from super() there (its
    # check names the class before slots re-made it); a record says it is frozen, as 3.12 does.
    for obj, attempts in ((d(a="x"), ("a",)), (r(a="x"), ("a", "zz"))):
        for attempt in attempts:
            with pytest.raises(AttributeError) as set_exc:
                setattr(obj, attempt, "y")
            with pytest.raises(AttributeError) as del_exc:
                delattr(obj, attempt)
            # code that catches dataclasses' error (this module imported dataclasses) still does
            assert isinstance(set_exc.value, dataclasses.FrozenInstanceError)
            assert isinstance(del_exc.value, dataclasses.FrozenInstanceError)
            if obj.__class__ is r:
                assert isinstance(set_exc.value, records.FrozenInstanceError)
            got = (str(set_exc.value), str(del_exc.value))
            assert got == (
                f"cannot assign to field {attempt!r}",
                f"cannot delete field {attempt!r}",
            )
    assert r(a="x").a == "x"


@pytest.mark.parametrize("key", OPTIONS)
def test_replace_fields_and_the_dataclasses_functions(key: str) -> None:
    d, r = PAIRS[key]
    rr = r(a="x", c={"k": 1})
    moved = records.replace(rr, b=5)
    assert (moved.a, moved.b, moved.c) == ("x", 5, {"k": 1}) and moved is not rr
    assert _outcome(lambda: records.replace(rr, zz=1))[1] == _outcome(
        lambda: dataclasses.replace(d(a="x"), zz=1)
    )[1].replace("D_", "R_")
    assert [f.name for f in records.fields(r)] == [f.name for f in dataclasses.fields(d)]
    assert [f.default for f in records.fields(rr)][3:] == [(), 0.5, None]
    with pytest.raises(TypeError, match="record"):
        records.replace(d(a="x"), b=1)
    # what third-party code calls on a record still works
    assert dataclasses.is_dataclass(r) and dataclasses.is_dataclass(rr)
    assert dataclasses.replace(rr, b=6).b == 6
    assert dataclasses.asdict(rr) == dataclasses.asdict(d(a="x", c={"k": 1}))
    dc_fields = [(f.name, f.type, f.default, f.default_factory) for f in dataclasses.fields(d)]
    assert [(f.name, f.type, f.default, f.default_factory) for f in dataclasses.fields(r)] == (
        dc_fields
    )
    assert r.__dataclass_params__.frozen == d.__dataclass_params__.frozen
    assert r.__dataclass_params__.eq == d.__dataclass_params__.eq


@pytest.mark.parametrize("key", OPTIONS)
def test_pickle_and_copy_round_trips(key: str) -> None:
    r = PAIRS[key][1]
    rr = r(a="x", c={"k": [1]}, d=("y",))
    dd = PAIRS[key][0](a="x", c={"k": [1]}, d=("y",))
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        # protocols 0 and 1 cannot pickle a slotted class without __getstate__, as dataclasses
        if _outcome(lambda: pickle.dumps(dd, protocol))[0] == "TypeError":  # noqa: B023
            with pytest.raises(TypeError, match="cannot be pickled"):
                pickle.dumps(rr, protocol)
            continue
        back = pickle.loads(pickle.dumps(rr, protocol))
        assert type(back) is r and vars_of(back) == vars_of(rr)
    shallow, deep = copy.copy(rr), copy.deepcopy(rr)
    assert vars_of(shallow) == vars_of(deep) == vars_of(rr)
    assert shallow.c is rr.c and deep.c is not rr.c


def vars_of(obj: Any) -> dict[str, Any]:
    return {f.name: getattr(obj, f.name) for f in records.fields(obj)}


@pytest.mark.parametrize("key", OPTIONS)
def test_slots_and_no_instance_dict(key: str) -> None:
    d, r = PAIRS[key]
    assert getattr(r, "__slots__", None) == getattr(d, "__slots__", None)
    assert hasattr(r(a="x"), "__dict__") == hasattr(d(a="x"), "__dict__")
    assert hasattr(r(a="x"), "__weakref__") == hasattr(d(a="x"), "__weakref__")


def test_class_level_mistakes_are_refused_as_dataclasses_does() -> None:
    for decorate, field in (
        (dataclasses.dataclass, dataclasses.field),
        (records.record_class, records.field),
    ):
        with pytest.raises(ValueError, match="mutable default"):
            decorate()(type("M", (), {"__annotations__": {"x": "list[int]"}, "x": []}))
        with pytest.raises(TypeError, match="non-default argument 'y' follows default argument"):
            decorate()(type("M", (), {"__annotations__": {"x": "int", "y": "int"}, "x": 1}))
        with pytest.raises(TypeError, match="no type annotation"):
            decorate()(type("M", (), {"x": field(default=1)}))
        with pytest.raises(ValueError, match="both default and default_factory"):
            field(default=1, default_factory=list)


def test_the_hot_classes_are_records_built_through_their_slots() -> None:
    step = Step(kind="tool_call", name="read_csv", span_id="s1", trace_id="t1")
    assert records.replace(step, turn=2).turn == 2
    assert ToolFacts(tool="x").tool_schemas == {}
    with pytest.raises(ValueError, match="needs a reason"):
        Verdict(evaluator="e", outcome="not_evaluated", score=None, label="x", explanation="")
    assert "__dict__" not in dir(step)
    verdict = Verdict(evaluator="e", outcome="pass", score=1.0, label="ok", explanation="")
    assert dataclasses.replace(verdict, score=0.5).score == 0.5  # third-party code's calls
    assert dataclasses.asdict(verdict)["target"] == dataclasses.asdict(verdict.target)
    assert pickle.loads(pickle.dumps(verdict)) == verdict


def test_init_is_compiled_once_the_class_is_hot_or_looked_up() -> None:
    d, r = _pair("frozen_slots_kw", tag="_hot")
    first = [r(a="x", b=i) for i in range(COMPILE_AFTER)]
    assert not inspect.isfunction(vars(r)["__init__"])  # still the shared one
    assert [x.b for x in first] == list(range(COMPILE_AFTER))
    r(a="x")
    assert inspect.isfunction(vars(r)["__init__"])
    d, r = _pair("slots", tag="_looked_up")
    assert str(inspect.signature(r.__init__)) == str(inspect.signature(d.__init__))
    assert inspect.isfunction(vars(r)["__init__"])


def test_eval_of_a_small_file_compiles_no_dataclass(tmp_path: Path) -> None:
    """Start-up: `dataclasses` (and the `inspect` it imports) cost a newcomer's `spanjudge eval`
    ~45% of its start-up; records need neither. `-S`: no `.pth` hook imports them first."""
    traces = FIXTURES / "claude_code" / "claude_code.jsonl"
    argv = ("eval", str(traces), "-q", "-o", str(tmp_path / "t.txt"))
    loaded = modules_after(*argv, cwd=tmp_path, flags=("-S",))
    assert sorted(m for m in ("dataclasses", "inspect") if m in loaded) == []
    assert "spanjudge.trajectory.steps" in loaded and sys.executable


def test_src_defines_its_values_as_records() -> None:
    """One mechanism: a ``@dataclass`` in `src` would bring the start-up cost back."""
    src = Path(records.__file__).parent
    offending = [
        str(path.relative_to(src))
        for path in sorted(src.rglob("*.py"))
        if path.name != "records.py"
        and any(
            line.lstrip().startswith(("import dataclasses", "from dataclasses import"))
            for line in path.read_text(encoding="utf-8").splitlines()
        )
    ]
    assert offending == []


def test_a_frozen_error_imports_nothing() -> None:
    """Without `dataclasses` imported, the error is records' own (an AttributeError) and raising
    it does not import `dataclasses`."""
    script = (
        "import sys\n"
        "from spanjudge.values import Target\n"
        "try:\n"
        "    Target(skill='x').skill = 'y'\n"
        "except AttributeError as exc:\n"
        "    print(type(exc).__module__, type(exc).__name__, exc, 'dataclasses' in sys.modules)\n"
    )
    assert run_isolated(script).split() == [
        "spanjudge.records",
        "FrozenInstanceError",
        "cannot",
        "assign",
        "to",
        "field",
        "'skill'",
        "False",
    ]
