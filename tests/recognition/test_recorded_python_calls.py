"""A Python function's call recorded as `{"args": [...], "kwargs": {...}}` reads as the same
arguments whichever instrumentation recorded it: smolagents and other OpenInference tool spans,
OpenLLMetry's decorated tools, and spans that state their role under their own prefix. The
keyword arguments are the arguments; positional ones, when there are any, are kept under
`args` beside them, and a call handed one mapping and nothing else has that mapping as its
arguments."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from spanjudge.recognition.registry import RecogniserRegistry
from spanjudge.spans.files import read_input
from spanjudge.spans.record import SpanRecord
from tests.conftest import FIXTURES

# (fixture file, the attribute saying a span is a tool call, its value, the input attribute)
TOOL_SPANS = [
    ("smolagents/smolagents.jsonl", "openinference.span.kind", "TOOL", "input.value"),
    ("crewai/crewai.jsonl", "openinference.span.kind", "TOOL", "input.value"),
    ("openllmetry/openllmetry.jsonl", "traceloop.span.kind", "tool", "traceloop.entity.input"),
    ("langfuse/langfuse.jsonl", "langfuse.observation.type", "tool", "langfuse.observation.input"),
]

RECORDED = [
    ({"args": [], "kwargs": {"path": "out/a.txt"}}, {"path": "out/a.txt"}),
    ({"args": ["out/a.txt"], "kwargs": {}}, {"args": ["out/a.txt"]}),
    ({"args": ["out/a.txt"]}, {"args": ["out/a.txt"]}),
    ({"args": ["out/a.txt"], "kwargs": {"mode": "w"}}, {"args": ["out/a.txt"], "mode": "w"}),
    (
        {"args": [], "sanitize_inputs_outputs": False, "kwargs": {"path": "out/a.txt"}},
        {"path": "out/a.txt"},
    ),
    # the one mapping a tool was handed is its arguments
    ({"args": [{"path": "out/a.txt"}], "kwargs": {}}, {"path": "out/a.txt"}),
    ({"args": [{"path": "out/a.txt"}, 2], "kwargs": {}}, {"args": [{"path": "out/a.txt"}, 2]}),
]


def _tool_span(file: str, kind_key: str, kind: str, input_key: str) -> SpanRecord:
    """A tool call that is no skill load (its arguments are the step's, whatever they say)."""
    spans = [s for c in read_input(str(FIXTURES / file)) for s in c.spans]
    return next(
        s
        for s in spans
        if s.attributes.get(kind_key) == kind
        and not any(w in f"{s.name} {s.attributes.get(input_key)}" for w in ("skill", "playbook"))
    )


@pytest.mark.parametrize(("file", "kind_key", "kind", "input_key"), TOOL_SPANS)
@pytest.mark.parametrize(("recorded", "arguments"), RECORDED)
def test_a_recorded_call_reads_as_the_same_arguments(
    file: str,
    kind_key: str,
    kind: str,
    input_key: str,
    recorded: dict[str, Any],
    arguments: dict[str, Any],
) -> None:
    span = _tool_span(file, kind_key, kind, input_key)
    rewritten = dataclasses.replace(
        span, attributes={**span.attributes, input_key: json.dumps(recorded)}
    )
    steps = RecogniserRegistry.default().recognise_span(rewritten)
    assert [s.kind for s in steps] == ["tool_call"]
    assert steps[0].arguments == arguments
