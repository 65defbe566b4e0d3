"""`outcome`: rules (contains, regex, JSON path) or a judge against a reference answer."""

from __future__ import annotations

from typing import Any

from spanjudge.evaluators.base import EvaluationContext
from spanjudge.evaluators.outcome import Outcome
from spanjudge.values import Expectation, Verdict
from tests.judges.builders import CSV_REQUEST, Answer, Tool, trajectory

ANSWER = 'Done. ```json\n{"total": 42, "regions": [{"name": "north", "total": 10}]}\n```'


def run(
    options: dict[str, Any] | None = None,
    answer: str | None = ANSWER,
    **expect: Any,
) -> Verdict:
    problems: list[str] = []
    evaluator = Outcome.from_options(options or {}, "evaluators.outcome", problems)
    assert problems == []
    events = [Tool("read_csv")] + ([Answer(answer)] if answer else [])
    ctx = EvaluationContext(
        trajectory=trajectory(CSV_REQUEST, *events), expectation=Expectation(**expect)
    )
    [verdict] = evaluator.evaluate(ctx)
    return verdict


def test_contains_from_options() -> None:
    ok = run({"contains": "north"})
    bad = run({"contains": ["north", "south"]})
    assert (ok.outcome, ok.judge) == ("pass", "rule")
    assert bad.outcome == "fail"
    assert "contains 'south': no" in bad.explanation


def test_regex_and_case() -> None:
    assert run({"regex": r"DONE\."}).outcome == "pass"
    assert run({"regex": r"DONE\.", "ignore_case": False}).outcome == "fail"


def test_json_path_equals() -> None:
    assert run({"json_path": "$.total", "equals": 42}).outcome == "pass"
    assert run({"json_path": "$.regions[0].name", "equals": "north"}).outcome == "pass"
    wrong = run({"json_path": "$.total", "equals": 41})
    assert wrong.outcome == "fail"
    assert "$.total == 41: got 42" in wrong.explanation


def test_expectation_success_beats_options() -> None:
    verdict = run({"contains": "absent"}, success={"contains": "42"})
    assert verdict.outcome == "pass"
    assert "the session's expectations" in verdict.explanation


def test_reference_answer_uses_the_judge() -> None:
    ok = run(answer="The grand total is 42.", reference_answer="42")
    bad = run(answer="The grand total is 41.", reference_answer="42")
    assert (ok.outcome, ok.judge, bad.outcome) == ("pass", "heuristic", "fail")


def test_not_evaluated_without_condition_or_answer() -> None:
    assert run().reason == "no_condition"
    assert run({"contains": "42"}, answer=None).reason == "no_final_answer"


def test_invalid_options_are_reported() -> None:
    problems: list[str] = []
    Outcome.from_options({"regex": "(", "json_path": "$.a", "foo": 1}, "o", problems)
    assert (
        problems[0]
        == "o.foo: unknown option (allowed: contains, regex, json_path, equals, ignore_case)"
    )
    assert problems[1].startswith("o.regex: invalid regular expression '('")
    assert problems[2] == "o: json_path and equals go together"


def test_invalid_expectation_condition_is_not_evaluated() -> None:
    verdict = run(success={"regex": "("})
    assert (verdict.outcome, verdict.reason) == ("not_evaluated", "invalid_condition")
