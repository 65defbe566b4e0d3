"""What recognition remembers between sessions stays small whatever the input: attribute keys,
span names and tool names have no length limit, and answers remembered for them (keys and names
repeat on every span of a kind) must not keep long ones after their sessions are gone."""

from __future__ import annotations

import gc
import json
import tracemalloc
from pathlib import Path

from spanjudge import CollectingSink
from spanjudge.config import parse_config
from spanjudge.engine import Engine
from spanjudge.offline import run_offline

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


def test_long_keys_and_names_are_not_kept_after_their_sessions(tmp_path: Path) -> None:
    warm, path = tmp_path / "warm.jsonl", tmp_path / "long.jsonl"
    _trace_file(warm, "warm", sessions=2)
    _trace_file(path, "long", sessions=SESSIONS)
    run_offline([str(warm)], Engine(parse_config({})), CollectingSink())
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        sink = CollectingSink()
        run_offline([str(path)], Engine(parse_config({})), sink)
        assert len(sink.results) == SESSIONS
        del sink
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # the input's long texts come to SESSIONS * CHARS * 3 characters
    assert kept < SESSIONS * CHARS // 4, f"{kept / 1e6:.1f} MB kept after the sessions"
