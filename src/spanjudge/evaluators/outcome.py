"""`outcome`: does the final answer meet the task's success condition? (DESIGN section 5).

The condition is, in order of precedence: rules from the session's expectations (``success``),
rules from this evaluator's options, or a judge comparing the answer with the expectation's
``reference_answer``. Rules (all must hold)::

    outcome: {contains: "42"}                      # or a list: every string must appear
    outcome: {regex: "total: \\d+"}                # re.search
    outcome: {json_path: "$.total", equals: 42}    # the answer (or its JSON block) parsed as JSON
    outcome: {contains: "Paris", ignore_case: false}   # contains/regex ignore case by default
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from spanjudge.errors import JudgeError
from spanjudge.evaluators.base import EvaluationContext, unknown_options
from spanjudge.evaluators.verdict import (
    NO_CONDITION,
    NO_FINAL_ANSWER,
    SESSION_INCOMPLETE,
    Target,
    Verdict,
    not_evaluated,
)
from spanjudge.judges.ask import ask, error_verdict, judge_of
from spanjudge.judges.base import JudgeRequest

NAME = "outcome"
INVALID_CONDITION = "invalid_condition"
RULE_KEYS = ("contains", "regex", "json_path", "equals", "ignore_case")
_PATH_PART = re.compile(r"\.?([^.\[\]]+)|\[(\d+)\]")
_MISSING = object()


def validate_rules(rules: Mapping[str, Any], path: str, problems: list[str]) -> None:
    """Report every problem of one rule set (evaluator options or an expectation's success)."""
    unknown_options(rules, RULE_KEYS, path, problems)
    contains = rules.get("contains")
    if contains is not None and not (
        isinstance(contains, str)
        or (isinstance(contains, list) and contains and all(isinstance(c, str) for c in contains))
    ):
        problems.append(f"{path}.contains: expected a string or a list of strings")
    regex = rules.get("regex")
    if regex is not None and not isinstance(regex, str):
        problems.append(f"{path}.regex: expected a regular expression string")
    elif isinstance(regex, str):
        try:
            re.compile(regex)
        except re.error as exc:
            problems.append(f"{path}.regex: invalid regular expression {regex!r}: {exc}")
    json_path = rules.get("json_path")
    if json_path is not None and (not isinstance(json_path, str) or not json_path.strip()):
        problems.append(f"{path}.json_path: expected a path such as $.result.total")
    if (json_path is None) != ("equals" not in rules):
        problems.append(f"{path}: json_path and equals go together")
    if not isinstance(rules.get("ignore_case", True), bool):
        problems.append(f"{path}.ignore_case: expected true or false")


def _json_in(text: str) -> Any:
    candidates = [text.strip()]
    fence = re.search(r"```(?:json)?\s*\n(.*?)\n\s*```", text, re.DOTALL)
    if fence:
        candidates.append(fence.group(1))
    starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    if starts:
        start = min(starts)
        end = max(text.rfind("}"), text.rfind("]"))
        candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except ValueError:
            continue
    return _MISSING


def _lookup(doc: Any, path: str) -> Any:
    current = doc
    for name, index in _PATH_PART.findall(path.strip().removeprefix("$")):
        if index:
            if not isinstance(current, list) or int(index) >= len(current):
                return _MISSING
            current = current[int(index)]
        elif isinstance(current, list) and name.isdigit() and int(name) < len(current):
            current = current[int(name)]
        elif isinstance(current, Mapping) and name in current:
            current = current[name]
        else:
            return _MISSING
    return current


def check_rules(rules: Mapping[str, Any], answer: str) -> tuple[bool, list[str]]:
    """Apply every rule; returns (all held, one line per rule saying what was checked)."""
    flags = re.IGNORECASE if rules.get("ignore_case", True) else 0
    results: list[tuple[bool, str]] = []
    contains = rules.get("contains")
    for needle in [contains] if isinstance(contains, str) else contains or []:
        found = re.search(re.escape(needle), answer, flags) is not None
        results.append((found, f"contains {needle!r}: {'yes' if found else 'no'}"))
    if isinstance(rules.get("regex"), str):
        found = re.search(rules["regex"], answer, flags) is not None
        results.append((found, f"matches /{rules['regex']}/: {'yes' if found else 'no'}"))
    if isinstance(rules.get("json_path"), str):
        doc = _json_in(answer)
        want = rules.get("equals")
        if doc is _MISSING:
            results.append((False, f"{rules['json_path']} == {want!r}: the answer is not JSON"))
        else:
            got = _lookup(doc, rules["json_path"])
            ok = got is not _MISSING and got == want
            shown = "missing" if got is _MISSING else json.dumps(got)
            results.append((ok, f"{rules['json_path']} == {json.dumps(want)}: got {shown}"))
    return all(ok for ok, _ in results), [line for _, line in results]


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    name: str = NAME
    rules: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_options(cls, options: Mapping[str, Any], path: str, problems: list[str]) -> Outcome:
        validate_rules(options, path, problems)
        return cls(rules=dict(options))

    def evaluate(self, ctx: EvaluationContext) -> list[Verdict]:
        trajectory = ctx.trajectory
        expectation = ctx.expectation
        rules = dict(expectation.success) if expectation.success else self.rules
        source = "the session's expectations" if expectation.success else "evaluator options"
        has_rules = any(k in rules for k in ("contains", "regex", "json_path"))
        judge = judge_of(ctx.judge)
        if not has_rules and not expectation.reference_answer:
            return [
                not_evaluated(
                    NAME,
                    NO_CONDITION,
                    "no success condition: set `success` or `reference_answer` in the "
                    "expectations, or contains/regex/json_path in the outcome evaluator options",
                    judge=judge.name,
                )
            ]
        turn = trajectory.last_turn
        target = Target(turn=turn.index, span_id=turn.span_id) if turn else Target()
        answer = trajectory.final_answer
        if not answer:
            reason = NO_FINAL_ANSWER if trajectory.complete else SESSION_INCOMPLETE
            return [
                not_evaluated(
                    NAME, reason, "the session has no final answer to check", target=target
                )
            ]
        if has_rules:
            problems: list[str] = []
            validate_rules(rules, "success", problems)
            if problems:
                return [
                    not_evaluated(
                        NAME,
                        INVALID_CONDITION,
                        f"the success condition from {source} is invalid: {'; '.join(problems)}",
                        target=target,
                        error_type="ConfigError",
                    )
                ]
            ok, lines = check_rules(rules, answer)
            return [
                Verdict(
                    evaluator=NAME,
                    outcome="pass" if ok else "fail",
                    score=1.0 if ok else 0.0,
                    label="success" if ok else "failure",
                    explanation=f"condition from {source}: {'; '.join(lines)}",
                    target=target,
                    judge="rule",
                    evidence=(target.span_id,) if target.span_id else (),
                )
            ]
        result = ask(
            judge,
            JudgeRequest(
                kind="outcome",
                request=trajectory.request,
                prior_context=tuple(t.request for t in trajectory.turns[1:] if t.request),
                catalogue=trajectory.catalogue,
                steps=trajectory.steps,
                final_answer=answer,
                reference_answer=expectation.reference_answer,
                task=expectation.task,
            ),
        )
        if isinstance(result, JudgeError):
            return [error_verdict(NAME, judge, result, target, "outcome against the reference")]
        ok = result.rating == "yes"
        return [
            Verdict(
                evaluator=NAME,
                outcome="pass" if ok else "fail",
                score=result.score,
                label="success" if ok else "failure",
                explanation=(
                    f"condition: agrees with the reference answer {expectation.reference_answer!r}"
                    f": {result.rationale}"
                ),
                target=target,
                judge=judge.name,
                evidence=(target.span_id,) if target.span_id else (),
            )
        ]
