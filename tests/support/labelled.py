"""The hand-labelled fixture sessions `spanjudge calibrate` is tested on (tests/test_calibrate.py,
tests/test_cli_verbose_colour.py)."""

from __future__ import annotations

from tests.conftest import FIXTURES

LABELS = FIXTURES / "labels" / "tool_calls.yaml"
TRACES = [
    str(FIXTURES / "strands" / "strands_trajectory.jsonl"),
    str(FIXTURES / "genai_manual" / "genai_manual.jsonl"),
]
