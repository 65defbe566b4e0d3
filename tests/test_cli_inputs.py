"""`spanjudge eval` inputs: several expectations files, and a directory of trace files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from spanjudge.cli import main
from tests.conftest import ROOT

STRANDS = ROOT / "fixtures" / "strands"


def _report(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    main(["eval", "--format", "json", *argv])
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    return report


def _from_files(report: dict[str, Any]) -> list[str]:
    """The sessions whose expectations came from an expectations file."""
    return sorted(
        s["session_id"]
        for s in report["sessions"]
        if "expectations_file" in s["expectation_sources"]
    )


def test_two_expectations_files_are_both_used(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    sessions = yaml.safe_load((STRANDS / "expectations.yaml").read_text())["sessions"]
    names = sorted(n for n in sessions if n.startswith("strands-default-") and "*" not in n)
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    first.write_text(yaml.safe_dump({"sessions": {names[0]: sessions[names[0]]}}))
    second.write_text(yaml.safe_dump({"sessions": {names[1]: sessions[names[1]]}}))
    trace = str(STRANDS / "strands_default.jsonl")
    report = _report(capsys, trace, "--expect", str(first), "--expect", str(second))
    assert _from_files(report) == names[:2]


def test_two_expectations_files_that_disagree_name_both(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    first.write_text("sessions:\n  s-1: {skills: [csv-report]}\n  s-2: {skills: [x]}\n")
    second.write_text("sessions:\n  s-1: {skills: [release-notes]}\n  s-2: {skills: [x]}\n")
    trace = str(STRANDS / "strands_default.jsonl")
    code = main(["eval", trace, "--expect", str(first), "--expect", str(second)])
    err = capsys.readouterr().err
    assert code == 2
    assert f"sessions.s-1: set differently in {first} and {second}" in err
    assert "s-2" not in err  # said the same in both: no conflict
    assert "Traceback" not in err


def test_a_directory_is_read_file_by_file_in_name_order(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    traces = tmp_path / "traces"
    (traces / "older").mkdir(parents=True)
    shutil.copy(STRANDS / "strands_latest.jsonl", traces / "b.jsonl")
    shutil.copy(STRANDS / "strands_default.jsonl", traces / "a.jsonl")
    (traces / "notes.txt").write_text("not a trace\n")
    shutil.copy(STRANDS / "strands_trajectory.jsonl", traces / "older" / "c.jsonl")
    from_dir = _report(capsys, str(traces))
    from_files = _report(
        capsys, str(STRANDS / "strands_default.jsonl"), str(STRANDS / "strands_latest.jsonl")
    )
    ids = [s["session_id"] for s in from_dir["sessions"]]
    assert ids and ids == [s["session_id"] for s in from_files["sessions"]]
    assert from_dir["input"]["files"] == 2  # not the .txt, not the subdirectory


def test_a_directory_with_no_trace_file_is_an_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("x\n")
    assert main(["eval", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"spanjudge: error: {tmp_path}: a directory with no trace file in it" in err
