"""Hand-built steps and the SDK spans they stand for, for trajectory and evaluator tests."""

from __future__ import annotations

from typing import Any

from spanjudge.trajectory.steps import Step
from tests.conftest import span


def tool(
    n: int,
    name: str,
    *,
    parent: int = 1,
    args: Any = None,
    error: str | None = None,
    trace: int = 1,
) -> Step:
    return Step(
        kind="tool_call",
        name=name,
        span_id=format(n, "016x"),
        trace_id=format(trace, "032x"),
        parent_span_id=format(parent, "016x"),
        start_unix_nano=n * 10,
        end_unix_nano=n * 10 + 5,
        status="error" if error else "ok",
        arguments=args,
        error=error,
    )


def turn(n: int, request: str, trace: int = 1) -> Step:
    return Step(
        kind="agent_turn",
        name="agent",
        span_id=format(n, "016x"),
        trace_id=format(trace, "032x"),
        start_unix_nano=n * 10,
        end_unix_nano=n * 10 + 1000,
        text=request,
        agent_name="shop",
    )


def spans_for(steps: list[Step]) -> list[Any]:
    return [
        span(
            int(s.span_id, 16),
            trace=int(s.trace_id, 16),
            parent=int(s.parent_span_id, 16) if s.parent_span_id else None,
            start=s.start_unix_nano,
            end=s.end_unix_nano,
        )
        for s in steps
    ]
