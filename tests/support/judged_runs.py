"""`spanjudge eval --format json` run as a user runs it on some sessions of the GenAI fixture,
with a scripted LLM judge configured (tests of custom evaluators, goal assertions, judge cost)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema

from spanjudge.cli import main
from tests.conftest import FIXTURES, load_schema

TRACES = FIXTURES / "genai_manual" / "genai_manual.jsonl"
MULTI_TURN = "genai-manual-multi-turn"
# The report schema of the design contract, when this machine has it.
SHARED_SCHEMA = Path("/work/shared/schemas/report.schema.json")


def traces(tmp_path: Path, *ids: str) -> Path:
    """The fixture's lines that carry the given sessions, in a file of their own."""
    lines = TRACES.read_text().splitlines()
    path = tmp_path / "traces.jsonl"
    path.write_text("\n".join(x for x in lines if any(f'"{i}"' in x for i in ids)) + "\n")
    return path


def run_eval(tmp_path: Path, config: dict[str, Any], *ids: str, expect: Any = None) -> Any:
    """The JSON report of `spanjudge eval`, checked against the report schemas."""
    cfg = tmp_path / "spanjudge.json"
    cfg.write_text(json.dumps(config))
    out = tmp_path / "report.json"
    argv = ["eval", str(traces(tmp_path, *ids)), "--config", str(cfg), "--format", "json"]
    if expect is not None:
        exp = tmp_path / "expect.json"
        exp.write_text(json.dumps(expect))
        argv += ["--expect", str(exp)]
    status = main([*argv, "--output", str(out)])
    assert status in (0, 1)
    report = json.loads(out.read_text())
    jsonschema.validate(report, load_schema())
    if SHARED_SCHEMA.exists():
        jsonschema.validate(report, json.loads(SHARED_SCHEMA.read_text()))
    return report


def verdicts(report: Any, evaluator: str) -> list[dict[str, Any]]:
    """Every verdict of ``evaluator`` in the report, session by session."""
    return [v for s in report["sessions"] for v in s["verdicts"] if v["evaluator"] == evaluator]
