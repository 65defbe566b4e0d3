"""A span whose name or scope name is not a str (the OpenTelemetry SDK takes whatever a caller
passes, e.g. bytes) costs that span only, as it always did: every preset is asked about it and
the one that chokes is contained; the session's other spans are still recognised."""

from __future__ import annotations

import pytest

from spanjudge.guard import contained
from spanjudge.recognition.registry import RecogniserRegistry
from spanjudge.spans.record import SpanRecord


def _span(span_id: str, name: object, scope: object = None, **attributes: object) -> SpanRecord:
    return SpanRecord(
        trace_id="1" * 32,
        span_id=span_id,
        parent_span_id=None,
        name=name,  # type: ignore[arg-type]
        start_unix_nano=1,
        end_unix_nano=2,
        attributes=attributes,  # type: ignore[arg-type]
        scope_name=scope,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("name", "scope"),
    [
        (b"claude_code.tool", None),
        (["claude_code.tool"], None),
        ("claude_code.tool", b"smolagents"),
        ("claude_code.tool", ["smolagents"]),
    ],
)
def test_a_span_with_an_odd_name_costs_only_that_span(name: object, scope: object) -> None:
    registry = RecogniserRegistry.default()
    turn = _span("a" * 16, "claude_code.interaction", user_prompt="hi")
    odd = _span("b" * 16, name, scope)
    with contained():
        steps = registry.recognise_session([turn, odd, turn])
    assert [step.kind for step in steps] == ["agent_turn", "agent_turn"]
