"""Reference trajectories written from the fixture generators' own call logs (`calls` or
`tool_log` in each `scenarios.json`; for the hand-instrumented GenAI fixtures, the log of the
generator's own agent loop, run again), never from spanjudge's output: what `trajectory_match`
tests and the metamorphic tests compare the recorded sessions with."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider

GENERATORS = Path(__file__).resolve().parents[2] / "fixtures" / "generate"


@dataclass(frozen=True, slots=True, kw_only=True)
class Logged:
    """One call of a generator's log: its tool, and the skill when the log marks a load."""

    tool: str
    arguments: dict[str, Any]
    skill: str | None = None
    completes_load: bool = False  # the read that completes a lazy loader's load

    def entry(self) -> dict[str, Any]:
        """The reference entry a user writes for it: a load by its skill, else the tool."""
        if self.skill is not None and not self.completes_load:
            return {"skill": self.skill}
        return {"tool": self.tool, "arguments": self.arguments}


def logged_calls(record: dict[str, Any]) -> list[Logged] | None:
    """The generator's call log. Logs that mark skill loads (`kind`) give each load's skill; a
    lazy loader's call and the read completing it are one load (the log marks the first
    `lazy`). Logs that do not mark loads list every call by its tool."""
    log = record.get("calls", record.get("tool_log"))
    if log is None:
        return None
    out: list[Logged] = []
    lazy: set[str] = set()
    for call in log:
        tool, args = call.get("tool", call.get("name")), call.get("args") or {}
        skill = call.get("skill") if call.get("kind") == "skill_load" else None
        completes = skill is not None and skill in lazy
        if completes:
            lazy.discard(skill)
        elif skill is not None and call.get("lazy"):
            lazy.add(skill)
        out.append(Logged(tool=tool, arguments=args, skill=skill, completes_load=completes))
    return out


def reference_entries(record: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The call log as the entries of a reference trajectory, in order."""
    calls = logged_calls(record)
    return None if calls is None else [c.entry() for c in calls]


def marks_loads(record: dict[str, Any]) -> bool:
    return any(c.get("kind") == "skill_load" for c in record.get("calls", ()))


def compared(call: Logged, reference: list[dict[str, Any]]) -> bool:
    """Whether trajectory_match compares ``call`` with ``reference``, by its documented rule:
    every tool call; a skill load where the reference lists its skill or its tool."""
    if call.skill is None:
        return True
    tools = {e.get("tool") for e in reference}
    skills = {e.get("skill") for e in reference}
    return call.tool in tools or (not call.completes_load and call.skill in skills)


def references(directory: Path) -> dict[str, dict[str, Any]]:
    """Session id -> its reference trajectory (`exact`; `any_order` for concurrent calls),
    for every session of the fixture directory whose generator kept a call log."""
    out = {}
    for record in json.loads((directory / "scenarios.json").read_text())["sessions"]:
        tools = reference_entries(with_call_log(directory, record))
        if tools is None:
            continue
        match = "any_order" if record["scenario"] == "parallel_tools" else "exact"
        out[record["session_id"]] = {"match": match, "tools": tools}
    return out


@cache
def _genai_manual_logs() -> dict[str, list[dict[str, Any]]]:
    """Scenario -> the tool runs the genai_manual generator's agent loop logs (its `LOG`), the
    loop run again with its spans discarded: that generator keeps the log out of
    scenarios.json, and needs only the OpenTelemetry SDK."""
    spec = importlib.util.spec_from_file_location(
        "genai_manual_fixtures", GENERATORS / "genai_manual_fixtures.py"
    )
    assert spec is not None and spec.loader is not None
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    tracer = TracerProvider().get_tracer("call-log")
    logs = {}
    for scenario in generator.SCENARIOS:
        generator.LOG.clear()
        generator.FILES.clear()
        agent = generator.Agent(tracer, scenario, "call-log")
        turns = scenario["turns"]
        for i, (text, steps) in enumerate(turns):
            agent.turn(text, steps, last=i == len(turns) - 1)
        logs[scenario["scenario"]] = [
            {"tool": e["name"], "args": e.get("args"), "ok": e["ok"], "kind": e["kind"],
             "skill": e.get("skill")}
            for e in generator.LOG
        ]  # fmt: skip
    return logs


def with_call_log(directory: Path, record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with its generator's call log as `calls`, where the generator kept one."""
    if "calls" in record or "tool_log" in record:
        return record
    if directory.name == "genai_manual":
        return {**record, "calls": _genai_manual_logs()[record["scenario"]]}
    return record
