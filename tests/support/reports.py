"""Offline runs whose results a test reads, and the Strands fixtures' own scenario records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from spanjudge import CollectingSink
from spanjudge.config import parse_config
from spanjudge.engine import Engine
from spanjudge.offline import run_offline
from spanjudge.values import SessionResult
from tests.conftest import FIXTURES

STRANDS = FIXTURES / "strands"


def evaluate_fixture(path: Path, config: dict[str, Any]) -> dict[str, SessionResult]:
    """Every session of a fixture file, evaluated with ``config`` (parsed like a config file)."""
    writer = CollectingSink()
    run_offline([str(path)], Engine(parse_config(config)), writer)
    return {r.trajectory.session_id: r for r in writer.results}


def records(file: str | None = None) -> list[dict[str, Any]]:
    doc = json.loads((STRANDS / "scenarios.json").read_text())
    return [s for s in doc["sessions"] if file is None or s["file"] == file]


def verdict_of(result: SessionResult, evaluator: str) -> Any:
    [verdict] = [v for v in result.verdicts if v.evaluator == evaluator]
    return verdict


TRAJECTORY = [s for s in records("strands_trajectory.jsonl")]
