"""A fixture session rewritten into a shape no fixture has, and the report `spanjudge eval`
gives for it: the tests of recognition by evidence start from traces real instrumentation
emitted and change only what the test is about."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from spanjudge.config import parse_config
from spanjudge.emit.report import JsonReportWriter
from spanjudge.engine import Engine
from spanjudge.expectations import ExpectationResolver, load_expectations_file
from spanjudge.offline import run_offline

FIXTURES = Path(__file__).parents[2] / "fixtures"
Span = dict[str, Any]


def file_requests(framework: str, name: str) -> list[dict[str, Any]]:
    """Every export request of fixture file ``framework/name``."""
    text = (FIXTURES / framework / name).read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def file_truth(framework: str, name: str) -> dict[str, dict[str, Any]]:
    """The scenario records (`scenarios.json`) of fixture file ``framework/name``, by session."""
    scenarios = json.loads((FIXTURES / framework / "scenarios.json").read_text())
    return {s["session_id"]: s for s in scenarios["sessions"] if s["file"] == name}


def session_requests(name: str, session_id: str) -> list[dict[str, Any]]:
    """The export requests of fixture file ``name`` (relative to fixtures/) holding only the
    spans of ``session_id`` (by their `session.id` or `gen_ai.conversation.id` attribute)."""
    out = []
    for line in (FIXTURES / name).read_text().splitlines():
        if not line.strip():
            continue
        request = json.loads(line)
        for resource in request.get("resourceSpans", ()):
            for scope in resource.get("scopeSpans", ()):
                scope["spans"] = [s for s in scope.get("spans", ()) if _of(s, session_id)]
        if any(True for _ in spans(request)):
            out.append(request)
    assert out, f"{name}: no span of session {session_id}"
    return out


def _of(span: Span, session_id: str) -> bool:
    return any(
        a["key"] in ("session.id", "gen_ai.conversation.id")
        and a["value"].get("stringValue") == session_id
        for a in span.get("attributes", ())
    )


def spans(request: dict[str, Any]) -> Iterator[Span]:
    for resource in request.get("resourceSpans", ()):
        for scope in resource.get("scopeSpans", ()):
            yield from scope.get("spans", ())


def attribute(span: Span, key: str) -> Any:
    """The decoded value of a span's string attribute ``key``, or None."""
    for a in span.get("attributes", ()):
        if a["key"] == key:
            return a["value"].get("stringValue")
    return None


def set_attribute(span: Span, key: str, value: str | None) -> None:
    """Set (or, with None, drop) a string attribute."""
    kept = [a for a in span.get("attributes", ()) if a["key"] != key]
    if value is not None:
        kept.append({"key": key, "value": {"stringValue": value}})
    span["attributes"] = kept


def drop_spans(requests: list[dict[str, Any]], which: Callable[[Span], bool]) -> None:
    for request in requests:
        for resource in request.get("resourceSpans", ()):
            for scope in resource.get("scopeSpans", ()):
                scope["spans"] = [s for s in scope.get("spans", ()) if not which(s)]


def report_of(
    requests: list[dict[str, Any]], tmp_path: Path, expectations: str | None = None
) -> dict[str, Any]:
    """The JSON report of ``requests`` written as an OTLP/JSON file, with the fixture
    expectations file ``expectations`` (relative to fixtures/)."""
    path = tmp_path / "rewritten.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in requests))
    engine = Engine(parse_config({}))
    if expectations is not None:
        resolver = ExpectationResolver(load_expectations_file(str(FIXTURES / expectations)))
        engine.add_expectations(resolver)
    buf = io.StringIO()
    run_offline([str(path)], engine, JsonReportWriter(buf))
    report: dict[str, Any] = json.loads(buf.getvalue())
    return report


def verdict(session: dict[str, Any], evaluator: str) -> dict[str, Any]:
    found = [v for v in session["verdicts"] if v["evaluator"] == evaluator]
    assert len(found) == 1, f"{evaluator}: {found}"
    return found[0]


def string_attributes(values: dict[str, str | None]) -> list[dict[str, Any]]:
    """OTLP JSON string attributes of ``values``, leaving out those that are None."""
    return [{"key": k, "value": {"stringValue": v}} for k, v in values.items() if v is not None]


def what_happened(session: dict[str, Any]) -> dict[str, Any]:
    """What a report says a session did, as rewrites of its trace must leave it: turns, model
    calls, tokens, tool calls, skill loads, the catalogue's source, the answer, the verdicts."""
    return {
        "turns": [s["text"] for s in session["steps"] if s["kind"] == "agent_turn"],
        "model_calls": session["stats"]["model_calls"],
        "tokens": (session["stats"]["input_tokens"], session["stats"]["output_tokens"]),
        "tool_calls": [
            (s["name"], s["arguments"], s["status"])
            for s in session["steps"]
            if s["kind"] == "tool_call"
        ],
        "skill_loads": [(x["skill"], x["status"]) for x in session["skill_loads"]],
        "catalogue": session["coverage"]["catalogue_source"],
        "final_answer": session["final_answer"],
        "verdicts": [(v["evaluator"], v["outcome"], v["label"]) for v in session["verdicts"]],
    }
