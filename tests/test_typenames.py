"""Names a module binds for type checkers only (`if TYPE_CHECKING:`; a run imports no `typing`)
are still given at run time when asked (`spanjudge.typenames`): the names code could import
before, and the type hints of every record."""

from __future__ import annotations

import importlib
import pkgutil
import sys
import typing
from pathlib import Path

import pytest

import spanjudge
from spanjudge.typenames import type_hints
from tests.support.startup import run_isolated

# module -> names it bound at run time before they became type-checking only
FORMER_RUNTIME_NAMES = {
    "spanjudge.values": ("Outcome",),
    "spanjudge.trajectory.steps": ("BodySource", "StepKind", "StepStatus", "SkillStatus"),
    "spanjudge.trajectory.effects": ("Effect",),
    "spanjudge.spans.record": ("StatusCode", "SpanKind"),
    "spanjudge.sessions.store": ("CloseReason",),
    "spanjudge.judges.registry": ("JudgeFactory", "JudgeSettings"),
    "spanjudge.recognition.registry": ("RecogniserFactory",),
    "spanjudge.emit.plugins": ("SinkFactory",),
    "spanjudge.pipeline": ("RevisionLedger",),
    "spanjudge.engine": ("JudgeLookup",),
    "spanjudge.config": ("SectionParser",),
    "spanjudge.evaluators.schema_subset": ("Check",),
    "spanjudge.offline": ("ReportWriter",),
    "spanjudge.evaluators.judging": ("RunEvaluator",),
}


@pytest.mark.parametrize("module", sorted(FORMER_RUNTIME_NAMES))
def test_a_name_bound_for_type_checkers_is_given_when_imported(module: str) -> None:
    for name in FORMER_RUNTIME_NAMES[module]:
        namespace: dict[str, object] = {}
        exec(f"from {module} import {name}", namespace)
        assert namespace[name] is getattr(importlib.import_module(module), name)


def test_the_literal_aliases_spell_the_value_tuples() -> None:
    from spanjudge.spans import record
    from spanjudge.trajectory import effects
    from spanjudge.values import OUTCOMES, Outcome

    assert typing.get_args(Outcome) == OUTCOMES
    assert typing.get_args(effects.Effect) == effects.EFFECTS
    assert typing.get_args(record.SpanKind) == record.SPAN_KINDS
    assert typing.get_args(record.StatusCode) == record.STATUS_CODES


def test_the_factory_protocols_are_the_ones_in_the_protocols_modules() -> None:
    from spanjudge.emit import base, plugins
    from spanjudge.judges import protocols as judges
    from spanjudge.judges import registry
    from spanjudge.recognition import protocols as recognition
    from spanjudge.recognition import registry as recognisers

    assert registry.JudgeFactory is judges.JudgeFactory
    assert recognisers.RecogniserFactory is recognition.RecogniserFactory
    assert plugins.SinkFactory is base.SinkFactory


def _record_classes() -> list[type]:
    found = []
    for info in pkgutil.walk_packages(spanjudge.__path__, "spanjudge."):
        if info.name.startswith(("spanjudge.sidecar", "spanjudge.demo", "spanjudge.__main__")):
            continue  # front ends that import optional or process-wide machinery
        module = importlib.import_module(info.name)
        found += [
            v
            for v in vars(module).values()
            if isinstance(v, type) and "__record_fields__" in vars(v) and v.__module__ == info.name
        ]
    return found


def test_every_record_has_its_type_hints() -> None:
    records = _record_classes()
    assert len(records) > 60
    for cls in records:
        hints = type_hints(cls)
        assert set(cls.__record_names__) <= set(hints), cls  # type: ignore[attr-defined]


def test_type_hints_give_what_the_annotations_say() -> None:
    from spanjudge.values import Verdict

    hints = type_hints(Verdict)
    assert hints["outcome"] == typing.Literal["pass", "fail", "not_evaluated"]
    assert hints["score"] == float | None


def test_an_unknown_name_is_an_attribute_error_and_import_probes_stay_quick() -> None:
    import spanjudge.values as values

    with pytest.raises(AttributeError, match="has no attribute 'Nothing'"):
        values.Nothing  # noqa: B018
    with pytest.raises(AttributeError):
        values.__path__  # noqa: B018  (a dunder never runs the type-checking blocks)


def test_threads_asking_at_once_get_the_same_object(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    import spanjudge.offline as offline
    from spanjudge import typenames

    monkeypatch.delitem(typenames._found, "spanjudge.offline", raising=False)
    start, got = threading.Barrier(8), []

    def ask() -> None:
        start.wait()
        got.append(offline.ReportWriter)

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 8 and all(g is offline.ReportWriter for g in got)


_MODULE = """
from spanjudge.typenames import module_getattr

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any as Thing
    {extra}
__getattr__ = module_getattr(__name__)
"""


@pytest.mark.parametrize(
    ("name", "extra", "remove_source", "given"),
    [
        ("tn_plain", "", False, True),
        ("tn_gone", "", True, False),  # the source removed after import (an upgrade in place)
        ("tn_broken", "import a_module_that_is_not_there", False, False),
    ],
)
def test_a_block_that_cannot_run_gives_no_names_and_no_error(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    extra: str,
    remove_source: bool,
    given: bool,
) -> None:
    source = tmp_path / f"{name}.py"
    source.write_text(_MODULE.format(extra=extra))
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module(name)
    try:
        if remove_source:
            source.unlink()
        assert hasattr(module, "Thing") is given
        assert not hasattr(module, "Other")
        if given:
            assert module.Thing is typing.Any
    finally:
        del sys.modules[name]


def test_asking_for_a_name_no_block_binds_runs_no_block() -> None:
    # pipeline's block imports the OTel metrics API (for a type): a `hasattr` probe for some
    # other name must not pay for it, nor import typing
    script = (
        "import sys, spanjudge.pipeline as p; assert not hasattr(p, 'nothing_of_that_name'); "
        "print(sorted(m for m in ('typing', 'spanjudge.emit.metrics') if m in sys.modules))"
    )
    assert run_isolated(script).strip() == "[]"
