"""`robustness`: counts always reported, thresholds decide; checked against the scenario record."""

from __future__ import annotations

import pytest

from spanjudge.config import parse_config
from spanjudge.errors import ConfigError
from tests.support.reports import STRANDS, evaluate_fixture, records, verdict_of

DEFAULT = [r for r in records("strands_default.jsonl")]


@pytest.fixture(scope="module")
def strict():  # type: ignore[no-untyped-def]
    return evaluate_fixture(
        STRANDS / "strands_default.jsonl",
        {"evaluators": {"robustness": {"max_retries": 0, "max_backtracks": 0, "max_errors": 0}}},
    )


def test_counts_and_verdicts_match_the_record(strict):  # type: ignore[no-untyped-def]
    assert any(r["retries"] for r in DEFAULT) and any(r["backtracks"] for r in DEFAULT)
    for record in DEFAULT:
        v = verdict_of(strict[record["session_id"]], "robustness")
        counts = {k: v.details[k] for k in ("retries", "backtracks", "errors")}
        assert counts == {k: record[k] for k in counts}, record["session_id"]
        bad = any(counts.values())
        assert v.outcome == ("fail" if bad else "pass"), (record["session_id"], v.explanation)
        if bad:
            assert v.evidence and v.score is not None and v.score < 1.0


def test_retry_and_backtrack_name_their_spans(strict):  # type: ignore[no-untyped-def]
    [retry] = [r for r in DEFAULT if r["scenario"] == "tool_error_retry"]
    v = verdict_of(strict[retry["session_id"]], "robustness")
    t = strict[retry["session_id"]].trajectory
    [again] = [s for s in t.tool_calls() if s.name == "write_file" and not s.failed]
    assert v.details["retry_span_ids"] == [again.span_id] and "retries 1 > 0" in v.explanation
    [undo] = [r for r in DEFAULT if r["scenario"] == "write_then_delete"]
    v = verdict_of(strict[undo["session_id"]], "robustness")
    [delete] = [
        s for s in strict[undo["session_id"]].trajectory.tool_calls() if s.name == "delete_file"
    ]
    assert v.details["backtrack_span_ids"] == [delete.span_id] and v.label == "too_many_backtracks"


def test_without_thresholds_counts_are_reported_and_nothing_is_scored():
    results = evaluate_fixture(STRANDS / "strands_default.jsonl", {})
    [retry] = [r for r in DEFAULT if r["scenario"] == "tool_error_retry"]
    v = verdict_of(results[retry["session_id"]], "robustness")
    assert v.outcome == "not_evaluated" and v.reason == "no_thresholds" and v.score is None
    assert v.details["retries"] == retry["retries"] and v.details["errors"] == retry["errors"]


def test_threshold_at_the_count_passes():
    results = evaluate_fixture(
        STRANDS / "strands_default.jsonl",
        {"evaluators": {"robustness": {"max_retries": 1, "max_errors": 1}}},
    )
    [retry] = [r for r in DEFAULT if r["scenario"] == "tool_error_retry"]
    assert (retry["retries"], retry["errors"]) == (1, 1)
    assert verdict_of(results[retry["session_id"]], "robustness").outcome == "pass"


def test_bad_thresholds_name_the_path():
    with pytest.raises(ConfigError) as err:
        parse_config(
            {"evaluators": {"robustness": {"max_retries": 1.5, "max_error_rate": 2, "retries": 1}}}
        )
    text = str(err.value)
    assert "evaluators.robustness.max_retries: expected a non-negative integer" in text
    assert "evaluators.robustness.max_error_rate: expected a number within 0..1" in text
    assert "evaluators.robustness.retries: unknown option (did you mean 'max_retries'?)" in text


def test_a_pass_spells_each_configuration_s_thresholds_as_written():
    # evaluators of two configurations in one process: thresholds that compare equal but are
    # written differently are each shown as written
    explanations = []
    for written in (0, -0.0, 2):
        results = evaluate_fixture(
            STRANDS / "strands_default.jsonl",
            {"evaluators": {"robustness": {"max_backtracks": written, "max_retries": 5}}},
        )
        passed = [
            v.explanation
            for r in results.values()
            if (v := verdict_of(r, "robustness")).outcome == "pass"
        ]
        assert passed, written
        explanations.append({e.rsplit("(thresholds: ", 1)[1] for e in passed})
    assert explanations == [
        {"retries <= 5, backtracks <= 0)"},
        {"retries <= 5, backtracks <= -0)"},
        {"retries <= 5, backtracks <= 2)"},
    ]
