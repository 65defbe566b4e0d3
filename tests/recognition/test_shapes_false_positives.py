"""What the shape rules must not read into ordinary spans: a word in a key that happens to end
in `type` or `kind` is no model call, an id among a function's arguments is no request, and
hostile keys and lines are read in time proportional to their length."""

from __future__ import annotations

import time

from spanjudge.recognition.catalogue import parse_catalogue
from spanjudge.recognition.catalogue_layouts import by_layout
from spanjudge.recognition.shapes import ShapeRecogniser
from tests.conftest import span


def test_a_role_word_in_an_error_type_or_a_kind_is_no_model_call() -> None:
    for attrs in (
        {"error.type": "unknown_model", "http.route": "/v1/models"},
        {"artifact.kind": "model", "artifact.path": "models/a.bin"},
    ):
        child = span(2, parent=1, name="GET /v1/models", attrs=attrs)
        assert ShapeRecogniser().recognise(child) is None, attrs


def test_a_said_model_call_with_counts_is_still_one() -> None:
    child = span(2, parent=1, name="llm", attrs={"span.type": "llm", "llm.usage.prompt_tokens": 5})
    (step,) = ShapeRecogniser().recognise(child) or []
    assert (step.kind, step.input_tokens) == ("model_call", 5)


def test_an_id_among_the_arguments_is_no_request() -> None:
    def turn(arguments: str) -> object:
        return span(
            1,
            name="run",
            attrs={"acme.type": "agent", "acme.input": arguments, "acme.output": "Done."},
        )

    def request(arguments: str) -> str | None:
        steps = ShapeRecogniser().recognise(turn(arguments)) or []
        (step,) = [s for s in steps if s.kind == "agent_turn"]
        return step.text

    assert request('{"user_id": "u-42", "k": 3}') is None
    asked = '{"user_id": "u-42", "question": "What was the total for March?"}'
    assert request(asked) == "What was the total for March?"


def test_hostile_catalogue_lines_and_keys_are_read_in_linear_time() -> None:
    blanks = " " * 100_000
    texts = [
        f"## Available skills\n- csv-report: b{blanks}c\n",
        f"Skills:\n- csv-report - b{blanks}c\n",
        f"skills:\n  - name: csv-report{blanks}x\n    description: b{blanks}c\n",
        f"## Available skills\n- csv-report: see (file: {blanks}\n",
    ]
    keys = ["tool" * 5_000 + "!.id", "function" * 3_000 + ".call.id"]
    started = time.perf_counter()
    for text in texts:
        parse_catalogue(text)
        by_layout(text, ("csv-report",))
    for key in keys:
        ShapeRecogniser().recognise(span(2, parent=1, attrs={key: "x", "tool.name": "t"}))
    assert time.perf_counter() - started < 2.0
