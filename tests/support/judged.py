"""A fixture judged by a configured (scripted) LLM judge: the traces and the configuration that
points `skill_selection` at it (tests/test_cli_judges.py, tests/test_cli_verbose_colour.py)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import FIXTURES

TRACES = FIXTURES / "strands" / "strands_default.jsonl"


def config(tmp_path: Path, base_url: str) -> Path:
    path = tmp_path / "spanjudge.yaml"
    path.write_text(
        "judges:\n"
        f"  local: {{type: openai, base_url: '{base_url}', model: scripted-judge,\n"
        "          max_retries: 0, timeout_s: 5}\n"
        "evaluators:\n"
        "  skill_selection: {judge: local}\n"
    )
    return path
