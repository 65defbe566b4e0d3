"""`spanjudge calibrate` against hand-labelled fixture sessions (fixtures/labels)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spanjudge.calibration import Label, cohen_kappa, compare, load_labels
from spanjudge.cli import main
from spanjudge.errors import InputError
from tests.support.labelled import LABELS, TRACES


def _json(capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, dict[str, object]]:
    code = main(["calibrate", str(LABELS), *TRACES, "--format", "json", *extra])
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    return {row["evaluator"]: row for row in doc["agreement"]}


def test_calibrate_reports_agreement_per_evaluator_and_judge(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rows = _json(capsys)
    labels = load_labels(str(LABELS))
    for name in ("tool_selection", "tool_parameters", "instruction_following"):
        row = rows[name]
        assert row["judge"] == "heuristic"
        assert row["labelled"] == sum(1 for lab in labels if lab.evaluator == name)
        assert row["coverage"] == 1.0
    # The labelled misses the heuristic cannot see (an incomplete sum inside an expression, a
    # placeholder written before anything was read) are reported, not hidden.
    misses = {(d["session"], d["target"]) for d in rows["tool_parameters"]["disagreements"]}
    assert misses == {
        ("strands-default-csv-summary-seed-2", "calculate#1"),
        ("genai-manual-reordered-skipped", "write_file#1"),
    }
    assert rows["tool_parameters"]["confusion"]["fail"] == {"fail": 4, "pass": 2}
    assert rows["tool_selection"]["accuracy"] == 1.0


def test_calibrate_table_names_the_figures(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", str(LABELS), *TRACES]) == 0
    out = capsys.readouterr().out
    header, *lines = out.splitlines()
    assert header.split()[:7] == [
        "evaluator",
        "judge",
        "labelled",
        "scored",
        "coverage",
        "accuracy",
        "kappa",
    ]
    assert any(line.startswith("tool_parameters") and "fail->pass: 2" in line for line in lines)


def test_a_label_without_a_verdict_counts_against_coverage_not_accuracy() -> None:
    labels = [Label(session_id="nowhere", evaluator="outcome", target=None, expected="pass")]
    (row,) = compare(labels, {})
    assert (row["labelled"], row["scored"], row["coverage"], row["accuracy"]) == (1, 0, 0.0, None)


def test_kappa_is_chance_corrected() -> None:
    assert cohen_kappa([("pass", "pass"), ("fail", "fail")]) == 1.0
    assert cohen_kappa([("pass", "pass"), ("pass", "pass")]) is None
    assert cohen_kappa([("pass", "fail"), ("fail", "pass")]) == -1.0


def test_bad_labels_name_the_place(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "labels.yaml"
    bad.write_text("sessions:\n  s1:\n    outcome: 3\n    tool_parameters: {x#1: ''}\n")
    with pytest.raises(InputError) as info:
        load_labels(str(bad))
    assert "sessions.s1.outcome: expected an outcome or a label, got 3" in str(info.value)
    assert "sessions.s1.tool_parameters.x#1" in str(info.value)
    assert main(["calibrate", str(bad), *TRACES]) == 2
    assert "sessions.s1.outcome" in capsys.readouterr().err
