"""A tool call's failure read from the structure the trace gives, before any wording: here an
error envelope in the result of a tool span that says nothing of failure.

The case is a real fixture session (pydantic-ai, `write_file` raising on a read-only path, its
result text "Read-only file system: '/out/report.md'" saying nothing of failure), compared with
what happened (the fixture set's scenarios.json).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.rewritten import report_of, session_requests, spans

FIXTURES = Path(__file__).parents[2] / "fixtures"
SESSION = "pydantic-ai-tool-error-retry"


def _truth() -> dict[str, Any]:
    scenarios = json.loads((FIXTURES / "pydantic_ai" / "scenarios.json").read_text())
    (found,) = [s for s in scenarios["sessions"] if s["session_id"] == SESSION]
    return dict(found)


def _with_status(code: int) -> list[dict[str, Any]]:
    """The session with the status of each span that recorded an exception set to ``code``."""
    requests = session_requests("pydantic_ai/pydantic_ai.jsonl", SESSION)
    changed = 0
    for request in requests:
        for span in spans(request):
            if any(e["name"] == "exception" for e in span.get("events", ())):
                span["status"] = {"code": code} if code else {}
                changed += 1
    assert changed == 1
    return requests


def test_an_explicit_ok_status_is_not_overruled_by_an_exception_event(tmp_path: Path) -> None:
    """The span says OK although it recorded an exception (handled inside the tool): its
    status stands."""
    (session,) = report_of(_with_status(1), tmp_path, "pydantic_ai/expectations.yaml")["sessions"]
    assert session["stats"]["errors"] == 0


def test_an_http_status_in_the_result_is_a_failed_call(tmp_path: Path) -> None:
    """The same failure told only by the result's HTTP-like status (no span status, no
    exception, no word of failure): the call failed (before: an ordinary result)."""
    truth = _truth()
    requests = _with_status(0)
    for request in requests:
        for span in spans(request):
            if any(e["name"] == "exception" for e in span.get("events", ())):
                span["events"] = []
                result = {"status_code": 403, "detail": "Read-only file system: '/out/report.md'"}
                for attribute in span["attributes"]:
                    if attribute["key"] == "gen_ai.tool.call.result":
                        attribute["value"] = {"stringValue": json.dumps(result)}
    (session,) = report_of(requests, tmp_path, "pydantic_ai/expectations.yaml")["sessions"]
    stats = session["stats"]
    assert (stats["errors"], stats["retries"]) == (truth["errors"], truth["retries"])
    (failed,) = [s for s in session["steps"] if s["kind"] == "tool_call" and s.get("error")]
    assert failed["error"] == "HTTP 403: Read-only file system: '/out/report.md'"
