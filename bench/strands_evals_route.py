"""Strands Evals' best route over an OTLP JSON lines file, timed; run by `bench_offline.py` in
the Strands Evals venv (it is not a spanjudge dependency)::

    "$(scripts/setup-strands-evals)" bench/strands_evals_route.py FILE SKILL

Strands Evals reads SDK `ReadableSpan`s, not files, so the route is the cheapest one a user can
write: `json.loads` each line, build a `ReadableSpan` per span directly from the dicts (no
protobuf), group them by `session.id`, then per session `StrandsInMemorySessionMapper` and the
deterministic `SkillInvoked` check. Prints one JSON line: spans, sessions, seconds, skill passes.
"""

from __future__ import annotations

import json
import sys
import time
from collections import defaultdict
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags
from strands_evals.evaluators.deterministic import SkillInvoked
from strands_evals.mappers import StrandsInMemorySessionMapper
from strands_evals.types.evaluation import EvaluationData

_KINDS = {
    1: SpanKind.INTERNAL,
    2: SpanKind.SERVER,
    3: SpanKind.CLIENT,
    4: SpanKind.PRODUCER,
    5: SpanKind.CONSUMER,
}
_CODES = {0: StatusCode.UNSET, 1: StatusCode.OK, 2: StatusCode.ERROR}


def _value(v: dict[str, Any]) -> Any:
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        return int(v["intValue"])
    if "doubleValue" in v:
        return float(v["doubleValue"])
    if "boolValue" in v:
        return bool(v["boolValue"])
    if "arrayValue" in v:
        return tuple(_value(x) for x in v["arrayValue"].get("values", []))
    return None


def _attrs(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {kv["key"]: _value(kv.get("value", {})) for kv in items}


def _span(doc: dict[str, Any], resource: Resource, scope: InstrumentationScope) -> ReadableSpan:
    trace_id = int(doc["traceId"], 16)
    context = SpanContext(trace_id, int(doc["spanId"], 16), False, TraceFlags(1))
    parent = doc.get("parentSpanId")
    status = doc.get("status", {})
    return ReadableSpan(
        name=doc["name"],
        context=context,
        parent=SpanContext(trace_id, int(parent, 16), False) if parent else None,
        resource=resource,
        attributes=_attrs(doc.get("attributes", [])),
        events=[
            Event(e["name"], _attrs(e.get("attributes", [])), int(e.get("timeUnixNano", 0)))
            for e in doc.get("events", [])
        ],
        kind=_KINDS.get(doc.get("kind", 1), SpanKind.INTERNAL),
        status=Status(_CODES.get(status.get("code", 0), StatusCode.UNSET), status.get("message")),
        start_time=int(doc["startTimeUnixNano"]),
        end_time=int(doc["endTimeUnixNano"]),
        instrumentation_scope=scope,
    )


def run(path: str, skill: str) -> dict[str, Any]:
    started = time.perf_counter()
    cpu_started = time.process_time()
    sessions: dict[str, list[ReadableSpan]] = defaultdict(list)
    spans = 0
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            for rs in json.loads(line)["resourceSpans"]:
                resource = Resource(_attrs(rs.get("resource", {}).get("attributes", [])))
                for ss in rs["scopeSpans"]:
                    scope = InstrumentationScope(ss.get("scope", {}).get("name", ""))
                    for doc in ss["spans"]:
                        span = _span(doc, resource, scope)
                        spans += 1
                        key = (span.attributes or {}).get("session.id")
                        if key is not None:
                            sessions[str(key)].append(span)
    mapper = StrandsInMemorySessionMapper()
    check = SkillInvoked(skill_name=skill)
    passed = 0
    for session_id, members in sessions.items():
        trajectory = mapper.map_to_session(members, session_id=session_id)
        [output] = check.evaluate(EvaluationData(input="", actual_trajectory=trajectory))
        passed += bool(output.test_pass)
    return {
        "spans": spans,
        "sessions": len(sessions),
        "seconds": time.perf_counter() - started,
        "cpu_seconds": time.process_time() - cpu_started,
        "skill_passed": passed,
    }


if __name__ == "__main__":
    print(json.dumps(run(sys.argv[1], sys.argv[2])))
