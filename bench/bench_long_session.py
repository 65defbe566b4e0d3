"""Cost per turn of one long session, small against large: the work must grow linearly.

    python bench/bench_long_session.py [--turns 250] [--scale 8]

Two shapes that once took quadratic time: turn spans that carry no answer (the
answer comes from the last model call of each trace), and spans whose parents are missing (every
step falls outside every turn span and is placed by time). Each session is recognised,
assembled and evaluated with every default evaluator; the figure is the time per turn at
``turns * scale`` turns over the time per turn at ``turns``, measured in this run. Linear work
reads about 1x; quadratic work reads about ``scale``x. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import time

from spanjudge.engine import Engine
from spanjudge.sessions.store import ClosedSession
from spanjudge.spans.record import SpanRecord

_SECOND = 1_000_000_000
_MISSING = "f" * 16  # a parent span id that no span in the session has


def session(turns: int, *, orphaned: bool) -> ClosedSession:
    """``turns`` traces: an agent turn with no answer recorded and three model calls under it
    (the last one stops with the answer); ``orphaned``: every parent id points nowhere."""
    spans = []
    for t in range(turns):
        trace_id = f"{t + 1:032x}"
        start = 1_700_000_000 * _SECOND + t * _SECOND
        turn_id = f"{(t + 1) * 16:016x}"
        spans.append(
            SpanRecord(
                trace_id=trace_id,
                span_id=turn_id,
                parent_span_id=_MISSING if orphaned else None,
                name="invoke_agent analyst",
                start_unix_nano=start,
                end_unix_nano=start + _SECOND * 9 // 10,
                attributes={
                    "gen_ai.operation.name": "invoke_agent",
                    "gen_ai.agent.name": "analyst",
                    "session.id": "long",
                },
            )
        )
        for k in range(3):
            output = [
                {
                    "role": "assistant",
                    "parts": [{"type": "text", "content": f"answer {t}.{k}"}],
                    "finish_reason": "stop" if k == 2 else "tool_call",
                }
            ]
            call_start = start + k * _SECOND // 10
            spans.append(
                SpanRecord(
                    trace_id=trace_id,
                    span_id=f"{(t + 1) * 16 + k + 1:016x}",
                    parent_span_id=_MISSING if orphaned else turn_id,
                    name="chat",
                    start_unix_nano=call_start,
                    end_unix_nano=call_start + _SECOND // 20,
                    attributes={
                        "gen_ai.operation.name": "chat",
                        "gen_ai.usage.input_tokens": 10,
                        "session.id": "long",
                        "gen_ai.output.messages": json.dumps(output),
                    },
                )
            )
    return ClosedSession(
        key="long", key_source="session.id", revision=1, reason="end_of_input", spans=tuple(spans)
    )


def per_turn_s(engine: Engine, turns: int, *, orphaned: bool, repeat: int = 3) -> float:
    closed = session(turns, orphaned=orphaned)
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        engine.evaluate(closed, engine.trajectory(closed))
        best = min(best, time.perf_counter() - started)
    return best / turns


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=250, help="turns of the small session")
    parser.add_argument("--scale", type=int, default=8, help="the large session has this many x")
    args = parser.parse_args()
    engine = Engine()
    per_turn_s(engine, 10, orphaned=False, repeat=1)  # lazy imports and caches out of the way
    large = args.turns * args.scale
    for orphaned, shape in ((False, "turn spans without an answer"), (True, "missing parents")):
        small_s = per_turn_s(engine, args.turns, orphaned=orphaned)
        large_s = per_turn_s(engine, large, orphaned=orphaned)
        print(
            f"{shape:30} {args.turns:6,} turns {small_s * 1e6:8.0f} us/turn   "
            f"{large:6,} turns {large_s * 1e6:8.0f} us/turn   ratio {large_s / small_s:.2f}x"
        )


if __name__ == "__main__":
    main()
