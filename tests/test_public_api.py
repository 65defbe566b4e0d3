"""The curated public API (`spanjudge/__init__.py`): every exported name resolves to the object
its defining module holds, and `import spanjudge` alone loads none of them."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

import spanjudge
from tests.conftest import ROOT


@pytest.mark.parametrize("name", [n for n in spanjudge.__all__ if n != "__version__"])
def test_every_exported_name_is_the_defining_modules_object(name: str) -> None:
    module = importlib.import_module(spanjudge._EXPORTS[name])
    assert getattr(spanjudge, name) is getattr(module, name)


def test_all_lists_exactly_the_exports() -> None:
    assert sorted(spanjudge.__all__) == sorted(["__version__", *spanjudge._EXPORTS])
    assert len(set(spanjudge.__all__)) == len(spanjudge.__all__)


def test_the_names_a_newcomer_imports() -> None:
    from spanjudge import (  # noqa: F401
        Config,
        Evaluator,
        Judge,
        Recogniser,
        Sink,
        SpanJudgeProcessor,
        Verdict,
        load_config,
        score_views,
    )

    assert isinstance(load_config(None), Config)
    assert spanjudge.__version__ == importlib.import_module("spanjudge._version").__version__


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        spanjudge.Nope  # noqa: B018


def test_import_spanjudge_is_cheap() -> None:
    """Nothing heavy at import: no SDK, no processor, no entry-point scan."""
    code = (
        "import sys, json, spanjudge; spanjudge.__version__; "
        "print(json.dumps(sorted(m for m in sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(ROOT / "src")},
    ).stdout
    loaded = set(json.loads(out))
    for heavy in ("spanjudge.processor", "opentelemetry.sdk.trace", "importlib.metadata", "yaml"):
        assert heavy not in loaded, heavy
