"""Minimal agent sessions written with a real SDK tracer."""

from __future__ import annotations


def agent_turn(tracer, session_id: str) -> None:  # type: ignore[no-untyped-def]
    """One `invoke_agent` span of agent `shop` in session ``session_id``."""
    with tracer.start_as_current_span(
        "invoke_agent shop",
        attributes={
            "session.id": session_id,
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "shop",
        },
    ):
        pass
