"""The terminal table fits its width and lists what `--show` asks for."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from spanjudge.cli import main
from tests.conftest import ROOT

TRACE = str(ROOT / "fixtures" / "strands" / "strands_trajectory.jsonl")
EXPECT = str(ROOT / "fixtures" / "strands" / "expectations.yaml")


def _table(capsys: pytest.CaptureFixture[str], *argv: str) -> list[str]:
    main(["eval", TRACE, "--expect", EXPECT, "--no-color", *argv])
    return capsys.readouterr().out.splitlines()


@pytest.mark.parametrize("columns", ["72", "100", "160"])
def test_every_line_fits_the_columns_and_no_explanation_is_cut(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, columns: str
) -> None:
    monkeypatch.setenv("COLUMNS", columns)
    lines = _table(capsys, "--show", "all")
    assert max(len(line) for line in lines) <= int(columns)
    text = " ".join(" ".join(lines).split())
    assert "…" not in text
    # an explanation longer than any of these widths, whole once its wrapped lines are joined
    assert (
        "duplicate_mutation: create_ticket repeated with the same arguments. created 0, "
        "modified 0, deleted 0, external calls 2, out of scope 0, repeated mutations 1, "
        "created then deleted 0"
    ) in text


def test_a_pipe_without_columns_gets_100() -> None:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    done = subprocess.run(
        [sys.executable, "-m", "spanjudge", "eval", TRACE, "--show", "all"],
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": os.pathsep.join(sys.path)},
        timeout=120,
    )
    lines = done.stdout.splitlines()
    assert len(lines) > 100
    assert max(len(line) for line in lines) == 100  # filled up to, never past, 100


def test_show_failures_lists_only_failing_sessions_and_their_failing_verdicts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    every = _table(capsys, "--show", "all")
    failures = _table(capsys, "--show", "failures")
    assert failures == _table(capsys)  # the default
    sessions = [line for line in failures if line.startswith("session ")]
    assert len(sessions) == 4
    assert len([line for line in every if line.startswith("session ")]) == 10
    marks = {line.split()[0] for line in failures if line.startswith("  ") and line[2:3] != " "}
    assert "PASS" not in marks and "NOT" not in marks and "FAIL" in marks
    assert "  (+ 4 pass, 5 not evaluated; --show all lists them)" in failures
    assert failures[-1] == (
        "6 session(s) with no failing verdict not listed (--show failures); "
        "--show all lists every session"
    )
    # the summary counts every session, whatever is listed
    assert "10 session(s); verdicts: 45 pass, 5 fail, 50 not evaluated" in failures


def test_show_summary_lists_no_session(capsys: pytest.CaptureFixture[str]) -> None:
    lines = _table(capsys, "--show", "summary")
    assert not any(line.startswith("session ") for line in lines)
    assert lines[0] == ""
    assert lines[1] == "10 session(s); verdicts: 45 pass, 5 fail, 50 not evaluated"
    assert lines[-1].startswith("10 session(s) not listed (--show summary)")
