"""Every fixture directory's JSON report (computed once per directory) and the generators' own
scenario records, the oracle the acceptance tests compare the reports with."""

from __future__ import annotations

import io
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from spanjudge import CollectingSink
from spanjudge.config import parse_config
from spanjudge.emit.report import JsonReportWriter
from spanjudge.engine import Engine
from spanjudge.expectations import ExpectationResolver, load_expectations_file
from spanjudge.offline import run_offline
from spanjudge.values import SessionResult
from tests.conftest import scenario_files

ROOT = Path(__file__).resolve().parents[2]


def _records() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in scenario_files():
        for record in json.loads(path.read_text())["sessions"]:
            out.append((str(path.parent), record))
    return out


def report(directory: str) -> dict[str, Any]:
    """The JSON report of every trace file in a fixture directory (with its expectations)."""
    return configured_report(directory, "{}")


@cache
def configured_report(directory: str, config: str) -> dict[str, Any]:
    """`report` under a configuration (JSON text, so that it can be cached)."""
    folder = Path(directory)
    engine = Engine(parse_config(json.loads(config)))
    expectations = folder / "expectations.yaml"
    if expectations.exists():
        engine.add_expectations(ExpectationResolver(load_expectations_file(str(expectations))))
    buf = io.StringIO()
    inputs = sorted(str(p) for p in folder.glob("*.jsonl"))
    run_offline(inputs, engine, JsonReportWriter(buf))
    report: dict[str, Any] = json.loads(buf.getvalue())
    return report


def session_report(directory: str, session_id: str, config: str = "{}") -> dict[str, Any]:
    """One session of `report` (or of `configured_report`), by id."""
    sessions = {s["session_id"]: s for s in configured_report(directory, config)["sessions"]}
    assert session_id in sessions, f"session {session_id} missing; have {sorted(sessions)[:10]}..."
    return sessions[session_id]


RECORDS = _records()

# Fixture sets with checks recognition does not pass yet, by directory: the reason, shown on
# each strict expected failure, so that each is noticed and unmarked once it passes.
AWAITING_SHAPE_RECOGNITION: dict[str, str] = {}


def _awaits(kind: str, record: dict[str, Any]) -> bool:
    """Whether this check needs what `AWAITING_SHAPE_RECOGNITION` says is not read yet."""
    if kind == "record":  # every record has a turn
        return True
    if kind == "skill_loaded":  # a required skill the record loaded must be found loaded
        loaded = {x["skill"] for x in record["skill_loads"] if x["status"] == "loaded"}
        return bool(loaded & set(record["expected_skills"]))
    return bool(call_log(record))  # "steps": every logged call must be found


def cases(kind: str) -> list[Any]:
    """RECORDS as pytest params; a set awaiting shape recognition is marked where it needs it."""
    out = []
    for directory, record in RECORDS:
        reason = AWAITING_SHAPE_RECOGNITION.get(Path(directory).name)
        marks = (
            [pytest.mark.xfail(strict=True, reason=reason)]
            if reason and _awaits(kind, record)
            else []
        )
        out.append(pytest.param(directory, record, id=record["session_id"], marks=marks))
    if kind == "steps":
        out = [p for p in out if call_log(p.values[1]) is not None]
    return out


def assert_matches_record(got: dict[str, Any], record: dict[str, Any]) -> None:
    """A session's report against the scenario's own record: skill loads, counts, answer, key."""
    # Some telemetry modes cannot show everything (Claude Code's default mode records no
    # content); there the report must not claim more than happened.
    hidden = set(record.get("unobservable", ()))
    # records that know where each body came from are compared on that too
    keys = ("skill", "status")
    if record["skill_loads"] and all("body_source" in x for x in record["skill_loads"]):
        keys = ("skill", "status", "body_source")
    loads = [tuple(x[k] for k in keys) for x in got["skill_loads"]]
    expected_loads = [tuple(x[k] for k in keys) for x in record["skill_loads"]]
    unseen = 0
    if "skill_loads" in hidden:
        assert all(load in expected_loads for load in loads)
        # a load the trace cannot name as one may still show as a call of its tool
        unseen = len(expected_loads) - len(loads)
    else:
        assert loads == expected_loads
    stats = got["stats"]
    for key in ("turns", "tool_calls", "model_calls", "errors", "retries", "backtracks"):
        if key in hidden:
            assert stats[key] <= record[key], key
        elif key == "tool_calls" and unseen:
            assert record[key] <= stats[key] <= record[key] + unseen, key
        elif key in record:
            assert stats[key] == record[key], f"{key}: {stats[key]} != scenario {record[key]}"
    for key in ("input_tokens", "output_tokens"):
        if record.get(key) is not None:
            assert stats[key] == record[key], key
    if "final_answer" in hidden:
        assert got["final_answer"] is None
    else:
        assert got["final_answer"] == (record["final_answer"] or None)
    if "traces" in record:
        assert len(got["trace_ids"]) == record["traces"]
    if "key_source" in record:
        assert got["session_key_source"] == record["key_source"]
    assert sorted(got["expected_skills"]) == sorted(record["expected_skills"])


def call_log(record: dict[str, Any]) -> list[tuple[str, Any]] | None:
    """(tool name, arguments) per executed call, from the generator's own log, when it kept one."""
    if "calls" in record:
        return [(c["tool"], c.get("args")) for c in record["calls"]]
    if "tool_log" in record:
        return [(c["name"], c.get("args")) for c in record["tool_log"]]
    return None


def assert_steps_match_call_log(got: dict[str, Any], record: dict[str, Any]) -> None:
    """The report's tool calls and skill loads, in order, are the generator's logged calls."""
    steps = [
        (s["name"], s.get("arguments"))
        for s in got["steps"]
        # a pinned skill is injected into the prompt by the harness: a load, but no call
        if s["kind"] in ("tool_call", "skill_load") and s["name"] != "pinned_skill"
    ]
    logged = call_log(record)
    assert logged is not None
    if record["scenario"] == "parallel_tools":  # concurrent calls: no order to compare
        steps.sort(key=repr)
        logged.sort(key=repr)
    assert [name for name, _ in steps] == [name for name, _ in logged]
    for (name, args), (_, logged_args) in zip(steps, logged, strict=True):
        # the logs leave file contents out: every argument they kept must match
        for key, value in (logged_args or {}).items():
            assert isinstance(args, dict) and args.get(key) == value, (name, key, args)


def fixture_results(*folders: str) -> list[SessionResult]:
    """Every evaluated session of the fixture directories named (each with its expectations),
    as results: what the sinks that emit verdicts are given."""
    out = CollectingSink()
    for folder in folders:
        directory = ROOT / "fixtures" / folder
        config = parse_config({"expectations_files": [str(directory / "expectations.yaml")]})
        files = sorted(str(p) for p in directory.glob("*.jsonl"))
        run_offline(files, Engine(config), out, skip_invalid=True)
    return out.results
