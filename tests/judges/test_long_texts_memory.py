"""Memory of a long-running judge over long texts: what the heuristic judges and the schema checks
remember of one session's requests, results, catalogue, skills and tool schemas is bounded by
the characters held, so a stream of sessions that each carry long texts never seen before (a
blob, an id, a generated catalogue) leaves the same memory behind after 400 sessions as after
100."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from spanjudge.config import parse_config
from spanjudge.engine import Engine
from spanjudge.pipeline import Pipeline
from spanjudge.sessions.store import SessionStore
from spanjudge.sidecar.config import InputConfig
from spanjudge.sidecar.intake import decode_body
from tests.support.memory import bytes_kept

_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _word(n: int, chars: int) -> str:
    """A run of letters of its own for session ``n``: ``chars`` long, no other session's."""
    digits = []
    while n or not digits:
        n, d = divmod(n, 26)
        digits.append(_LETTERS[d])
    head = "".join(digits) + "q"
    return (head * (chars // len(head) + 1))[:chars]


def _kv(key: str, value: str) -> dict[str, Any]:
    return {"key": key, "value": {"stringValue": value}}


def _session(n: int, long: str) -> bytes:
    """One agent turn: a model call offering two skills, a skill load, a tool call (with its
    recorded schema) and an answer; ``long`` is where session ``n``'s long text goes."""
    blob = _word(n, 20_000)
    request = f"summarise the report {blob}" if long == "request" else "summarise the report"
    description = "Summarise report files when the user asks for a summary"
    if long == "catalogue":
        description += " " + " ".join(_word(n * 1000 + i, 12) for i in range(1500))
    skill_body = "# report-summary\n1. Use read_file to read the report\n2. Answer with a summary\n"
    if long == "skill":
        skill_body += "".join(f"{i + 3}. Check {_word(n * 1000 + i, 12)}\n" for i in range(1500))
    if long == "step tools":
        named = " ".join(f"`{_word(n * 1000 + i, 12)}`" for i in range(1500))
        skill_body += f"3. Then use {named} as needed\n"
    schema: dict[str, Any] = {"type": "object", "properties": {"path": {"type": "string"}}}
    if long == "schema":
        schema["properties"]["mode"] = {"enum": [_word(n * 1000 + i, 12) for i in range(1500)]}
    if long == "one schema":  # the same long schema, in definitions that differ by a word
        schema["properties"]["mode"] = {"enum": [_word(i, 12) for i in range(1500)]}
    system = (
        "You are helpful.\n<available_skills>\n<skill><name>report-summary</name><description>"
        f"{description}</description></skill>\n<skill><name>csv-stats</name><description>"
        "Statistics of CSV files</description></skill>\n</available_skills>"
    )
    messages = [
        {"role": "system", "parts": [{"type": "text", "content": system}]},
        {"role": "user", "parts": [{"type": "text", "content": request}]},
    ]
    tools = [
        {"type": "function", "name": "read_file", "parameters": schema},
        {"type": "function", "name": "write_file", "description": f"Writes file {n}"},
    ]
    trace = f"{n + 1:032x}"
    root = f"{n + 1:08x}00000001"
    t0 = time.time_ns() - 2_000_000_000

    def span(i: int, name: str, attrs: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "traceId": trace,
            "spanId": f"{n + 1:08x}0000000{i}",
            "parentSpanId": root,
            "name": name,
            "kind": 1,
            "startTimeUnixNano": str(t0 + i * 1000),
            "endTimeUnixNano": str(t0 + i * 1000 + 500),
            "attributes": attrs,
        }

    arguments = json.dumps({"path": "report.txt"})
    result = f"Report data: {blob}s" if long == "request" else "Report data: 1, 2, 3"
    spans = [
        span(
            2,
            "chat model",
            [
                _kv("gen_ai.operation.name", "chat"),
                _kv("gen_ai.input.messages", json.dumps(messages)),
                _kv("gen_ai.tool.definitions", json.dumps(tools)),
            ],
        ),
        span(
            3,
            "execute_tool skills",
            [
                _kv("gen_ai.operation.name", "execute_tool"),
                _kv("gen_ai.tool.name", "skills"),
                _kv("gen_ai.tool.call.id", "load"),
                _kv("gen_ai.tool.call.arguments", json.dumps({"skill_name": "report-summary"})),
                _kv("gen_ai.tool.call.result", skill_body),
            ],
        ),
        span(
            4,
            "execute_tool read_file",
            [
                _kv("gen_ai.operation.name", "execute_tool"),
                _kv("gen_ai.tool.name", "read_file"),
                _kv("gen_ai.tool.call.id", "read"),
                _kv("gen_ai.tool.call.arguments", arguments),
                _kv("gen_ai.tool.call.result", result),
            ],
        ),
        {
            "traceId": trace,
            "spanId": root,
            "name": "invoke_agent agent",
            "kind": 1,
            "startTimeUnixNano": str(t0),
            "endTimeUnixNano": str(t0 + 10_000),
            "attributes": [
                _kv("gen_ai.operation.name", "invoke_agent"),
                _kv("gen_ai.agent.name", "agent"),
                _kv("session.id", f"session-{n}"),
                _kv(
                    "gen_ai.output.messages",
                    json.dumps(
                        [
                            {
                                "role": "assistant",
                                "parts": [{"type": "text", "content": "The report is summarised."}],
                            }
                        ]
                    ),
                ),
            ],
        },
    ]
    doc = {"resourceSpans": [{"scopeSpans": [{"scope": {"name": "agent"}, "spans": spans}]}]}
    return json.dumps(doc).encode()


@pytest.mark.parametrize(
    "long", ["request", "catalogue", "skill", "step tools", "schema", "one schema"]
)
def test_sessions_with_long_new_texts_leave_bounded_memory(long: str) -> None:
    bodies = [_session(n, long) for n in range(450)]
    kept: list[Pipeline] = []

    def judged(sessions: int) -> Callable[[], None]:
        def work() -> None:
            config = parse_config({"sessions": {"keep_closed_sessions": 0}})
            engine = Engine(config)
            pipeline = Pipeline(engine, SessionStore(config.policy), [])
            kept.append(pipeline)
            checks = InputConfig(min_start_unix_s=0)
            for body in bodies[50 : 50 + sessions]:
                decoded = decode_body(body, "json", config.limits, checks)
                assert pipeline.add(decoded.records, decoded.sizes) == 4
                [result] = pipeline.close_all("end_of_input")
                assert len(result.verdicts) > 5

        return work

    # The first sessions fill what is bounded by count (rule tables, metric names): warmed here.
    judged(50)()
    short, longer = bytes_kept(judged(100)), bytes_kept(judged(400))
    assert longer < 1.3 * short + 2_000_000, (short, longer)
