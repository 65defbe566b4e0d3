"""The JSON report (`schemas/report.schema.json`, Contract) and its streaming writer."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TextIO

from spanjudge._version import __version__
from spanjudge.emit.summary import Summary
from spanjudge.trajectory.model import Trajectory
from spanjudge.trajectory.steps import Step
from spanjudge.values import SessionResult


def step_to_json(step: Step) -> dict[str, Any]:
    kind = step.kind
    call = kind == "tool_call" or kind == "skill_load"
    out: dict[str, Any] = {
        "kind": kind,
        "name": step.name,
        "span_id": step.span_id,
        "turn": step.turn,
        "status": "error" if call and step.failed else step.status,
        "start_unix_nano": step.start_unix_nano,
        "end_unix_nano": step.end_unix_nano,
    }
    if call:
        out["tool_call_id"] = step.tool_call_id
        out["arguments"] = step.arguments
        out["result"] = step.result
        if step.error:
            out["error"] = step.error
        if kind == "skill_load":
            out["skill"] = step.skill
            out["skill_status"] = step.skill_status
    elif kind == "model_call":
        out["model"] = step.model
        out["input_tokens"] = step.input_tokens
        out["output_tokens"] = step.output_tokens
        out["finish_reason"] = step.finish_reason
    elif (kind == "agent_turn" or kind == "final_answer") and step.text is not None:
        out["text"] = step.text
    return out


def session_to_json(result: SessionResult) -> dict[str, Any]:
    t = result.trajectory
    out = _session_json(result, t)
    if t.log_records:
        out["log_records"] = t.log_records
        out["log_records_unjoined"] = t.log_records_unjoined
    return out


def _session_json(result: SessionResult, t: Trajectory) -> dict[str, Any]:
    return {
        "session_id": t.session_id,
        "session_key_source": t.session_key_source,
        "complete": t.complete,
        "close_reason": t.close_reason,
        "revision": t.revision,
        "task_id": t.task_id,
        "run_seed": t.run_seed,
        "agent_name": t.agent_name,
        "trace_ids": list(t.trace_ids),
        "turns": len(t.turns),
        "steps": [step_to_json(s) for s in t.steps],
        "skill_loads": [
            {
                "skill": load.skill,
                "status": load.status,
                "span_id": load.span_id,
                "tool_name": load.tool_name,
                "body_recorded": load.body_recorded,
                "body_source": load.body_source,
                "error": load.error,
                "turn": load.turn,
            }
            for load in t.skill_loads
        ],
        "catalogue": [{"name": c.name, "description": c.description} for c in t.catalogue],
        "final_answer": t.final_answer.strip() if t.final_answer is not None else None,
        "stats": t.stats.to_json(),
        "expected_skills": list(result.expectation.skills),
        "expectation_sources": list(result.expectation.sources),
        "verdicts": [v.to_json() for v in result.verdicts],
        "coverage": result.coverage.to_json(),
        "retry_span_ids": list(t.retry_span_ids),
        "backtrack_span_ids": list(t.backtrack_span_ids),
        "terminal_state": dict(t.terminal_state) if t.terminal_state is not None else None,
        "spans": t.span_count,
        "truncated_values": t.truncated_values,
    }


def _session_encoder() -> Callable[[Any], str]:
    """``json.dumps(obj, ensure_ascii=False, default=str)`` for one session, the same text: one
    encoder made once, without the cycle check (a session's JSON form is a tree of fresh dicts
    and lists)."""
    unchecked = json.JSONEncoder(ensure_ascii=False, default=str, check_circular=False).encode

    def dumps(obj: Any) -> str:
        try:
            return unchecked(obj)
        except RecursionError:  # a cycle (a plugin's details) or a deep tree: json.dumps' error
            return json.dumps(obj, ensure_ascii=False, default=str)

    return dumps


_dumps_session = _session_encoder()


class JsonReportWriter:
    """Writes one JSON document, sessions streamed as they are evaluated (memory stays flat)."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.first = True

    def begin(self) -> None:
        self.out.write(f'{{"spanjudge_version": {json.dumps(__version__)}, "sessions": [')

    def session(self, result: SessionResult) -> None:
        text = _dumps_session(session_to_json(result))
        self.out.write("\n" if self.first else ",\n")  # not prepended: that copies the text
        self.out.write(text)
        self.first = False

    def end(self, summary: Summary, input_report: dict[str, Any]) -> None:
        self.out.write("\n]")
        if summary.tasks:
            tasks = [p.to_json() for p in summary.tasks.values()]
            self.out.write(',\n"tasks": ' + json.dumps(tasks, ensure_ascii=False))
        self.out.write(',\n"summary": ' + json.dumps(summary.to_json(), ensure_ascii=False))
        self.out.write(',\n"input": ' + json.dumps(input_report, ensure_ascii=False))
        self.out.write("}\n")
