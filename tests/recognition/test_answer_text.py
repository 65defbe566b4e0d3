"""`assistant_text`: the last assistant text of an agent's output, in any shape it is recorded."""

from __future__ import annotations

import json
from typing import Any

import pytest

from spanjudge.recognition.answers import assistant_text


@pytest.mark.parametrize(
    ("output", "answer"),
    [
        ("The total is 3.", "The total is 3."),
        (json.dumps("The total is 3."), "The total is 3."),
        (
            [
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [
                        {"type": "output_text", "text": "The total is 3."},
                    ],
                },
            ],
            "The total is 3.",
        ),
        (
            [
                {"role": "assistant", "content": "Let me add them."},
                {"role": "tool", "content": "3"},
                {"role": "assistant", "content": "The total is 3."},
                {"role": "user", "content": "Thanks"},
            ],
            "The total is 3.",
        ),
        (
            {"role": "assistant", "items": [{"type": "text", "text": "The total is 3."}]},
            "The total is 3.",
        ),
        # a graph's state, a tool's payload, a user's message: no answer
        ({"messages": [{"role": "assistant", "content": "x"}], "step": 3}, None),
        ({"status": "ok", "rows": 3}, None),
        ({"role": "user", "content": "Add 1 and 2."}, None),
    ],
)
def test_the_last_assistant_text_of_any_output_shape(output: Any, answer: str | None) -> None:
    assert assistant_text(json.dumps(output) if not isinstance(output, str) else output) == answer
