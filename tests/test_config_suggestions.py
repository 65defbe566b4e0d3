"""A misspelt setting is answered with the spelling a user would write."""

from __future__ import annotations

from pathlib import Path

import pytest

from spanjudge.cli import main


def _errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], *argv: str, text: str) -> str:
    config = tmp_path / "spanjudge.yaml"
    config.write_text(text)
    assert main([*argv, "--config", str(config)]) == 2
    return capsys.readouterr().err


def test_a_misspelt_duration_suggests_the_duration_string_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text("")
    err = _errors(tmp_path, capsys, "eval", str(trace), text="sessions:\n  idle_timout: 15m\n")
    assert "sessions.idle_timout: unknown setting (did you mean 'idle_timeout'?)" in err
    # the seconds spelling is still the one offered for a misspelt seconds key
    err = _errors(tmp_path, capsys, "eval", str(trace), text="sessions:\n  idle_timout_s: 9\n")
    assert "sessions.idle_timout_s: unknown setting (did you mean 'idle_timeout_s'?)" in err


def test_a_misspelt_serve_setting_gets_a_suggestion(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _errors(tmp_path, capsys, "serve", text="serve:\n  spool:\n    max_byte: 100\n")
    assert "serve.spool.max_byte: unknown setting (did you mean 'max_bytes'?)" in err
