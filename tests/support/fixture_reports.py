"""Every fixture directory's JSON report (computed once per directory) and the generators' own
scenario records, the oracle the acceptance tests compare the reports with."""

from __future__ import annotations

import io
import json
from functools import cache
from pathlib import Path
from typing import Any

from spanjudge.config import parse_config
from spanjudge.emit.report import JsonReportWriter
from spanjudge.engine import Engine
from spanjudge.expectations import ExpectationResolver, load_expectations_file
from spanjudge.offline import run_offline
from tests.conftest import scenario_files


def _records() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in scenario_files():
        for record in json.loads(path.read_text())["sessions"]:
            out.append((str(path.parent), record))
    return out


@cache
def report(directory: str) -> dict[str, Any]:
    """The JSON report of every trace file in a fixture directory (with its expectations)."""
    folder = Path(directory)
    engine = Engine(parse_config({}))
    expectations = folder / "expectations.yaml"
    if expectations.exists():
        engine.add_expectations(ExpectationResolver(load_expectations_file(str(expectations))))
    buf = io.StringIO()
    inputs = sorted(str(p) for p in folder.glob("*.jsonl"))
    run_offline(inputs, engine, JsonReportWriter(buf))
    report: dict[str, Any] = json.loads(buf.getvalue())
    return report


def session_report(directory: str, session_id: str) -> dict[str, Any]:
    """One session of `report`, by id."""
    sessions = {s["session_id"]: s for s in report(directory)["sessions"]}
    assert session_id in sessions, f"session {session_id} missing; have {sorted(sessions)[:10]}..."
    return sessions[session_id]


RECORDS = _records()
