"""Metamorphic: a tool's failure told inside its result reads the same however the result is
written: as JSON, as the Python literal a framework records with ``str()``
(`{'status': 'error', ...}`), or wrapped with the call's name and input beside a flag that says
only that the tool raised nothing (`"is_error": false`).

Every fixture file with such a failure is reported once as recorded and once per rewrite; the
failed calls, the failed loads, their errors and the error and retry counts must not move.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from spanjudge.config import parse_config
from spanjudge.emit.report import JsonReportWriter
from spanjudge.engine import Engine
from spanjudge.offline import run_offline
from tests.metamorphic.transforms import (
    ENVELOPES,
    results_as_python_literals,
    results_in_envelopes,
)

FIXTURES = Path(__file__).parents[2] / "fixtures"
FILES = sorted(str(p.relative_to(FIXTURES)) for p in FIXTURES.glob("*/*.jsonl"))
Failures = dict[str, Any]


def _failures(path: str) -> Failures:
    """What each session's report says failed: its tool calls and loads with their errors,
    and its error and retry counts."""
    buf = io.StringIO()
    run_offline([path], Engine(parse_config({})), JsonReportWriter(buf))
    return {
        s["session_id"]: {
            "calls": [
                (x["kind"], x["name"], x.get("error"))
                for x in s["steps"]
                if x["kind"] in ("tool_call", "skill_load")
            ],
            "loads": [(x["skill"], x["status"], x["error"]) for x in s["skill_loads"]],
            "errors": s["stats"]["errors"],
            "retries": s["stats"]["retries"],
        }
        for s in json.loads(buf.getvalue())["sessions"]
    }


@cache
def _original(name: str) -> Failures:
    return _failures(str(FIXTURES / name))


def _assert_unchanged(
    name: str, rewrite: Callable[[dict[str, Any]], object], tmp_path: Path
) -> None:
    lines = [line for line in (FIXTURES / name).read_text().splitlines() if line.strip()]
    requests = [json.loads(line) for line in lines]
    for request in requests:
        rewrite(request)
    written = [json.dumps(r) for r in requests]
    if written == [json.dumps(json.loads(line)) for line in lines]:
        pytest.skip(f"{name} records no failure inside a tool's JSON result")
    path = tmp_path / Path(name).name
    path.write_text("\n".join(written) + "\n")
    before, after = _original(name), _failures(str(path))
    assert sorted(after) == sorted(before)
    for session, failures in before.items():
        assert after[session] == failures, session


@pytest.mark.parametrize("name", FILES)
def test_a_failure_written_as_a_python_literal(name: str, tmp_path: Path) -> None:
    _assert_unchanged(name, results_as_python_literals, tmp_path)


@pytest.mark.parametrize(("envelope", "name"), [(e, n) for n in FILES for e in sorted(ENVELOPES)])
def test_a_failure_wrapped_with_the_call(envelope: str, name: str, tmp_path: Path) -> None:
    _assert_unchanged(name, lambda request: results_in_envelopes(request, envelope), tmp_path)
