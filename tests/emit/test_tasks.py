"""Repeated runs of one task: per-component distributions in the JSON report and the table."""

from __future__ import annotations

import pytest

from spanjudge.cli import main
from spanjudge.emit.summary import Summary
from tests.support.reports import STRANDS, evaluate_fixture, records

RUNS = sorted(
    (r for r in records("strands_trajectory.jsonl") if r.get("task_id") == "csv-summary"),
    key=lambda r: r["run_seed"],
)
CONFIG = {
    "evaluators": {
        "side_effects": {"scope": ["out/**"]},
        "robustness": {"max_retries": 0, "max_errors": 0},
    }
}


def loaded(record) -> bool:  # type: ignore[no-untyped-def]
    return any(load["status"] == "loaded" for load in record["skill_loads"])


def test_profile_orders_runs_by_seed_and_gives_each_component_a_distribution():
    assert len(RUNS) == 5
    results = list(evaluate_fixture(STRANDS / "strands_trajectory.jsonl", CONFIG).values())
    summary = Summary()
    for result in reversed(results):  # arrival order must not matter
        summary.add(result)
    task = summary.tasks["csv-summary"].to_json()
    assert task["runs"] == 5 and task["seeds"] == [str(r["run_seed"]) for r in RUNS]
    assert task["sessions"] == [r["session_id"] for r in RUNS]
    comp = task["components"]["skill_loaded"]
    assert comp["outcomes"] == ["pass" if loaded(r) else "fail" for r in RUNS]
    passes = sum(loaded(r) for r in RUNS)
    assert (comp["pass"], comp["fail"]) == (passes, 5 - passes) == (4, 1)
    assert comp["pass_hat_k"]["1"] == pytest.approx(0.8)
    assert comp["pass_hat_k"]["2"] == pytest.approx(6 / 10)  # C(4,2)/C(5,2)
    assert comp["pass_hat_k"]["5"] == 0.0
    calls = task["components"]["stats.model_calls"]
    assert calls["values"] == [float(r["model_calls"]) for r in RUNS]
    assert (calls["min"], calls["median"], calls["max"], calls["spread"]) == (4, 5, 5, 1)
    tokens = task["components"]["stats.input_tokens"]
    assert tokens["values"] == [float(r["input_tokens"]) for r in RUNS]
    created = task["components"]["side_effects.created"]  # a measure from verdict details
    assert created["values"] == [float(len(r["side_effects"]["created"])) for r in RUNS]


def test_table_shows_the_five_run_distribution(capsys, tmp_path):  # type: ignore[no-untyped-def]
    config = tmp_path / "spanjudge.yaml"
    config.write_text(
        "evaluators:\n  side_effects: {scope: ['out/**']}\n"
        "  robustness: {max_retries: 0, max_errors: 0}\n"
    )
    main(["eval", "--config", str(config), str(STRANDS / "strands_trajectory.jsonl")])
    out = capsys.readouterr().out
    block = out[out.index("\ntask csv-summary:") + 1 :].splitlines()
    assert block[0] == "task csv-summary: 5 run(s), seeds 1 2 3 4 5"
    rows = {line.split()[0]: line for line in block[1:] if line.strip()}
    strip = " ".join("P" if loaded(r) else "F" for r in RUNS)
    assert f" {strip} " in rows["skill_loaded"]
    assert "80% (4/5)" in rows["skill_loaded"] and "k=5: 0%" in rows["skill_loaded"]
    assert "P P P P P" in rows["side_effects"] and "100% (5/5)" in rows["side_effects"]
    assert "- - - - -" in rows["cost"] and "n/a (0/0)" in rows["cost"]  # no budget: not judged
    per_run = " ".join(str(r["model_calls"]) for r in RUNS)
    assert rows["stats.model_calls"].split()[1:5] == ["4", "5", "5", "1"]
    assert rows["stats.model_calls"].endswith(per_run)


def test_two_of_the_five_runs_fail_with_the_reference_answers(capsys):  # type: ignore[no-untyped-def]
    """Seed 4 never loaded its skill; seed 2 answered a wrong total (the scenarios' labels)."""
    main(
        [
            "eval",
            "--expect",
            str(STRANDS / "expectations.yaml"),
            str(STRANDS / "strands_trajectory.jsonl"),
        ]
    )
    out = capsys.readouterr().out
    block = out[out.index("\ntask csv-summary:") + 1 :].splitlines()
    rows = {line.split()[0]: line for line in block[1:] if line.strip()}
    outcome = " ".join("P" if r["labels"]["outcome"] else "F" for r in RUNS)
    skill = " ".join("P" if loaded(r) else "F" for r in RUNS)
    assert (outcome, skill) == ("P F P P P", "P P P F P")
    assert f" {outcome} " in rows["outcome"] and "80% (4/5)" in rows["outcome"]
    assert f" {skill} " in rows["skill_loaded"]
    failing = {i for i, r in enumerate(RUNS) if not (r["labels"]["outcome"] and loaded(r))}
    assert len(failing) == 2
