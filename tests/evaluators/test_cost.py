"""`cost`: budgets, reference ratios and prices, checked against the scenarios' own token counts."""

from __future__ import annotations

import pytest

from spanjudge.config import parse_config
from spanjudge.errors import ConfigError
from tests.support.reports import STRANDS, TRAJECTORY, evaluate_fixture, verdict_of

REFERENCE = {"tool_calls": 3, "input_tokens": 1400}  # the correct run of the csv-summary task


def test_ratio_to_reference_and_price_match_the_record():
    results = evaluate_fixture(
        STRANDS / "strands_trajectory.jsonl",
        {
            "evaluators": {
                "cost": {
                    "reference": REFERENCE,
                    "max_ratio": 1.0,
                    "prices": {"scripted-*": {"input": 3.0, "output": 15.0}},
                    "currency": "EUR",
                }
            }
        },
    )
    for record in TRAJECTORY:
        v = verdict_of(results[record["session_id"]], "cost")
        m = v.details["measured"]
        assert m["input_tokens"] == record["input_tokens"]
        assert m["output_tokens"] == record["output_tokens"]
        assert m["tool_calls"] == record["tool_calls"] and m["model_calls"] == record["model_calls"]
        price = record["input_tokens"] * 3.0 / 1e6 + record["output_tokens"] * 15.0 / 1e6
        assert m["cost"] == pytest.approx(price)
        over = [k for k, ref in REFERENCE.items() if record[k] > ref]
        assert v.outcome == ("fail" if over else "pass"), v.explanation
        if over:
            worst = min(REFERENCE[k] / record[k] for k in over)
            assert v.score == pytest.approx(worst, abs=1e-6)
            assert all(k in v.explanation for k in over) and "EUR" in v.explanation


def test_budget_limits_hold_at_the_limit():
    [record] = [r for r in TRAJECTORY if r["scenario"] == "stale_cache_read"]
    total = record["input_tokens"] + record["output_tokens"]
    for budget, outcome in ((total, "pass"), (total - 1, "fail")):
        results = evaluate_fixture(
            STRANDS / "strands_trajectory.jsonl",
            {"evaluators": {"cost": {"budget": {"total_tokens": budget}}}},
        )
        v = verdict_of(results[record["session_id"]], "cost")
        assert v.outcome == outcome and v.details["measured"]["total_tokens"] == total


def test_no_budget_is_not_evaluated_but_reports_the_measures():
    results = evaluate_fixture(STRANDS / "strands_trajectory.jsonl", {})
    record = TRAJECTORY[0]
    v = verdict_of(results[record["session_id"]], "cost")
    assert v.outcome == "not_evaluated" and v.reason == "no_budget" and v.score is None
    assert v.details["measured"]["input_tokens"] == record["input_tokens"]
    assert f"tool calls {record['tool_calls']}" in v.explanation


def test_unpriced_model_leaves_a_cost_budget_unmeasured():
    results = evaluate_fixture(
        STRANDS / "strands_trajectory.jsonl",
        {
            "evaluators": {
                "cost": {
                    "budget": {"cost": 1.0},
                    "prices": {"gpt-4o": {"input": 2.5, "output": 10}},
                }
            }
        },
    )
    v = verdict_of(results[TRAJECTORY[0]["session_id"]], "cost")
    assert v.outcome == "not_evaluated" and v.reason == "not_measured"
    assert v.details["unpriced_models"] == ["scripted-model-1"]


def test_bad_options_name_the_path():
    with pytest.raises(ConfigError) as err:
        parse_config(
            {
                "evaluators": {
                    "cost": {
                        "budget": {"tokens": 5, "tool_calls": -1},
                        "budgett": {},
                        "reference": {"cost": 1},
                    }
                }
            }
        )
    text = str(err.value)
    assert "evaluators.cost.budget.tokens: unknown measure" in text
    assert "evaluators.cost.budget.tool_calls: expected a non-negative number" in text
    assert "evaluators.cost.budgett: unknown option" in text
    assert "evaluators.cost.prices: a cost budget or reference needs a price table" in text
