"""What recognition remembers between sessions stays small whatever the input: attribute keys,
span names and tool names have no length limit, and answers remembered for them (keys and names
repeat on every span of a kind) must not keep long ones after their sessions are gone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from spanjudge import CollectingSink
from spanjudge.config import parse_config
from spanjudge.engine import Engine
from spanjudge.offline import run_offline
from tests.support.memory import bytes_kept

SESSIONS = 200
CHARS = 60_000  # under the attribute value limit, so a tool name keeps its whole length


def _trace_file(path: Path, tag: str, sessions: int) -> None:
    """One span per session: a tool call with a long name, tool name and attribute key."""
    with path.open("w", encoding="utf-8") as out:
        for n in range(sessions):
            long = f"{tag}{n:06d}" + "x" * CHARS
            span = {
                "traceId": f"{n + 1:032x}",
                "spanId": f"{n + 1:016x}",
                "name": f"execute_tool {long}",
                "startTimeUnixNano": "1700000000000000000",
                "endTimeUnixNano": "1700000001000000000",
                "attributes": [
                    {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
                    {"key": "gen_ai.tool.name", "value": {"stringValue": long}},
                    {"key": "session.id", "value": {"stringValue": f"{tag}-{n}"}},
                    {"key": long, "value": {"stringValue": "some value"}},
                ],
            }
            line = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"spans": [span]}]}]}
            out.write(json.dumps(line) + "\n")


def _kept_after(warm: Path, path: Path, sessions: int) -> int:
    """Bytes still allocated after ``path``'s sessions are evaluated and dropped (after a run
    over ``warm``, so that what every run keeps is there before)."""
    run_offline([str(warm)], Engine(parse_config({})), CollectingSink())

    def run() -> None:
        sink = CollectingSink()
        run_offline([str(path)], Engine(parse_config({})), sink)
        assert len(sink.results) == sessions

    return bytes_kept(run)


def test_long_keys_and_names_are_not_kept_after_their_sessions(tmp_path: Path) -> None:
    warm, path = tmp_path / "warm.jsonl", tmp_path / "long.jsonl"
    _trace_file(warm, "warm", sessions=2)
    _trace_file(path, "long", sessions=SESSIONS)
    kept = _kept_after(warm, path, SESSIONS)
    # the input's long texts come to SESSIONS * CHARS * 3 characters
    assert kept < SESSIONS * CHARS // 4, f"{kept / 1e6:.1f} MB kept after the sessions"


_AGENT = {"gen_ai.operation.name": "invoke_agent"}
TEXTS_SESSIONS = 100
TEXT = 30_000  # characters of each long text


def _parts(text: str) -> list[dict[str, str]]:
    return [{"type": "text", "content": text}]


def _messages(role: str, text: str) -> str:
    return json.dumps([{"role": role, "parts": _parts(text)}])


def _span(trace: str, session: str, sid: int, name: str, pairs: dict[str, str]) -> dict[str, Any]:
    return {
        "traceId": trace,
        "spanId": f"{sid:016x}",
        "name": name,
        "startTimeUnixNano": f"{1700000000000000000 + sid}",
        "endTimeUnixNano": f"{1700000001000000000 + sid}",
        "attributes": [
            {"key": k, "value": {"stringValue": v}}
            for k, v in {"session.id": session, **pairs}.items()
        ],
    }


def _long_texts_file(path: Path, tag: str, sessions: int) -> None:
    """Per session, long texts of its own wherever recognition reads a text that repeats
    (system instructions, messages, tool definitions, a tool's result), from GenAI and from
    OpenInference instrumentation."""

    def long(what: str, n: int) -> str:
        return f"{tag} {what} {n:06d} " + "lorem ipsum " * (TEXT // 12)

    with path.open("w", encoding="utf-8") as out:
        for n in range(sessions):
            trace, session = f"{n + 1:032x}", f"{tag}-{n}"
            tools = [{"type": "function", "name": "read", "description": long("tool", n)}]
            described = {"name": "read", "description": long("oi", n)}
            schema = {"type": "function", "function": described}
            spans = [
                _span(trace, session, 1, "invoke_agent a", _AGENT),
                _span(
                    trace,
                    session,
                    2,
                    "chat m",
                    {
                        "gen_ai.operation.name": "chat",
                        "gen_ai.system_instructions": json.dumps(_parts(long("system", n))),
                        "gen_ai.input.messages": _messages("user", long("ask", n)),
                        "gen_ai.output.messages": _messages("assistant", long("say", n)),
                        "gen_ai.tool.definitions": json.dumps(tools),
                    },
                ),
                _span(
                    trace,
                    session,
                    3,
                    "execute_tool read",
                    {
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": "read",
                        "gen_ai.tool.call.result": long("result", n),
                    },
                ),
                _span(
                    trace,
                    session,
                    4,
                    "llm",
                    {
                        "openinference.span.kind": "LLM",
                        "input.value": long("prompt", n),
                        "llm.tools.0.tool.json_schema": json.dumps(schema),
                    },
                ),
            ]
            for child in spans[1:]:
                child["parentSpanId"] = spans[0]["spanId"]
            line = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"spans": spans}]}]}
            out.write(json.dumps(line) + "\n")


def test_long_texts_read_again_and_again_are_not_kept_after_their_sessions(
    tmp_path: Path,
) -> None:
    warm, path = tmp_path / "warm.jsonl", tmp_path / "long.jsonl"
    _long_texts_file(warm, "warm", sessions=2)
    _long_texts_file(path, "long", sessions=TEXTS_SESSIONS)
    kept = _kept_after(warm, path, TEXTS_SESSIONS)
    # the input's long texts come to TEXTS_SESSIONS * TEXT * 7 characters
    assert kept < TEXTS_SESSIONS * TEXT * 7 // 4, f"{kept / 1e6:.1f} MB kept after the sessions"
