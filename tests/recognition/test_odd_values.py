"""A value of a type its convention never writes (a number where arguments go, a list where a
content block's type goes) is read for what it is: the span keeps its step and recognition
counts no error."""

from __future__ import annotations

from typing import Any

import pytest

from spanjudge.recognition.registry import RecogniserRegistry
from tests.conftest import span


@pytest.mark.parametrize(
    ("attrs", "kind"),
    [
        # a decorated tool's input: positional arguments that are not a list
        ({"traceloop.span.kind": "tool", "traceloop.entity.input": '{"args": 5}'}, "tool_call"),
        ({"traceloop.span.kind": "tool", "traceloop.entity.input": '{"args": true}'}, "tool_call"),
        (
            {"traceloop.span.kind": "tool", "traceloop.entity.input": '{"args": {"a": 1}}'},
            "tool_call",
        ),
        # a message content block whose type is not text
        (
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.input.messages": '[{"role": "user", "content": [{"type": []}]}]',
            },
            "model_call",
        ),
        (
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.input.messages": '[{"role": "user", "content": [{"type": {"a": 1}}]}]',
            },
            "model_call",
        ),
    ],
)
def test_an_odd_value_keeps_the_step(attrs: dict[str, Any], kind: str) -> None:
    registry = RecogniserRegistry.default()
    steps = registry.recognise_session([span(1, name="call", attrs=attrs)])
    assert registry.errors == 0
    assert [s.kind for s in steps] == [kind]
