"""Custom judged evaluators, written in the configuration (``evaluators.custom``), no code.

Each entry is a question for an LLM judge with its own name, level and scale::

    evaluators:
      custom:
        - name: refund_policy            # a new evaluator name; not a built-in's
          level: session                 # session (default) | turn | tool_call
          instructions: "Did the agent promise a refund above 100 EUR? ..."
          scale:                         # categorical labels with scores (0..1) ...
            - {label: compliant, score: 1.0, definition: "no refund above 100 EUR promised"}
            - {label: violation, score: 0.0, definition: "a refund above 100 EUR promised"}
          pass_at: 0.5                   # pass when the label's score is at least this
          evidence: [request, answer, tool_calls]   # also tool_results, skill_bodies,
                                                    # model_messages
          judge: openai                  # a judge from `judges:` (default: the `default` one)
          tools: ["issue_*"]             # tool_call level only: which calls (globs)
          sample: 0.2                    # which sessions it judges (spanjudge/sampling.py);
          when: {environment: production}   # or under evaluators.refund_policy
        - name: tone
          level: turn
          instructions: "How polite is the reply?"
          scale: {min: 1, max: 5}        # ... or whole numbers; pass_at on the same scale
          pass_at: 4

One verdict per target (the session, each turn, each matching tool call), with the outcomes,
reasons and emission of the built-ins and the evaluator's name everywhere a built-in's would be.
The label is the judge's answer; the score is the label's (a numeric answer v of min..max scores
(v - min) / (max - min)). An answer outside the scale is ``not_evaluated`` / ``judge_error``.
The embedded heuristic judge cannot read a free-text criterion: without an LLM judge every
verdict is ``not_evaluated`` / ``no_judge``, and the engine says so once when it starts.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from spanjudge import reasons
from spanjudge.errors import JudgeError, did_you_mean
from spanjudge.evaluators.ask import ask, error_verdict, judge_of
from spanjudge.evaluators.base import EvaluationContext
from spanjudge.judges.base import Criterion, Judge, JudgeRequest, ScalePoint, rating_key
from spanjudge.judges.heuristic import HEURISTIC
from spanjudge.sampling import JUDGED, SELECTION_KEYS
from spanjudge.trajectory.model import Trajectory
from spanjudge.trajectory.steps import Step
from spanjudge.trajectory.toolnames import candidates
from spanjudge.values import Target, Verdict, not_evaluated

LEVELS = ("session", "turn", "tool_call")
EVIDENCE = ("request", "answer", "tool_calls", "tool_results", "skill_bodies", "model_messages")
DEFAULT_EVIDENCE = ("request", "answer", "tool_calls")
KEYS = (
    "name",
    "level",
    "instructions",
    "scale",
    "pass_at",
    "evidence",
    "judge",
    "tools",
    *SELECTION_KEYS,  # which sessions it judges: the engine's to apply (spanjudge/sampling.py)
)
# Keys of the `evaluators` section that are no evaluator's name.
RESERVED = (reasons.CUSTOM_SECTION, JUDGED)
# A name is a metric label value and a config key: plain lowercase words.
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_LABEL = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
MAX_NUMERIC_POINTS = 101


def needs_llm_judge(evaluator: object, judge: object) -> bool:
    """``evaluator`` judges a free-text criterion and ``judge`` is the heuristic one, which
    cannot: its verdicts will all be ``not_evaluated`` / ``no_judge``."""
    return bool(getattr(evaluator, "free_text_criterion", False)) and judge_of(judge) is HEURISTIC


def no_judge_verdict(evaluator: str, target: Target, what: str) -> Verdict:
    return not_evaluated(
        evaluator,
        reasons.NO_JUDGE,
        f"{what}: no LLM judge configured; the heuristic judge cannot judge a free-text "
        "criterion (add one under `judges:` and name it in the evaluator's `judge`, or call "
        "it `default`)",
        target=target,
        judge=HEURISTIC.name,
    )


def shown_steps(steps: Sequence[Step], evidence: Collection[str]) -> tuple[Step, ...]:
    """The steps the judge is shown, with only the fields ``evidence`` asks for: tool calls and
    skill loads (arguments; outputs and errors with ``tool_results``; SKILL.md bodies with
    ``skill_bodies``) and model outputs (``model_messages``). Requests and answers go in their
    own blocks."""
    calls = "tool_calls" in evidence or "tool_results" in evidence
    results = "tool_results" in evidence
    bodies = "skill_bodies" in evidence
    out = []
    for step in steps:
        if step.kind == "tool_call" or step.kind == "skill_load":
            if not calls and not (bodies and step.skill_body):
                continue
            out.append(
                replace(
                    step,
                    result=step.result if results else None,
                    error=step.error if results else None,
                    skill_body=step.skill_body if bodies else None,
                    also_loaded=step.also_loaded if bodies else (),
                )
            )
        elif step.kind == "model_call" and "model_messages" in evidence and step.text:
            out.append(step)
    return tuple(out)


def tool_matches(name: str, patterns: Sequence[str]) -> bool:
    """No patterns: every call. Else a glob matching the recorded name or its base name after
    a namespace (the one rule of `trajectory.toolnames`)."""
    if not patterns:
        return True
    return any(fnmatch.fnmatchcase(c, p) for c in candidates(name) for p in patterns)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Target:
    target: Target
    what: str
    request: JudgeRequest


@dataclass(frozen=True, slots=True, kw_only=True)
class CustomEvaluator:
    """One ``evaluators.custom`` entry."""

    free_text_criterion: ClassVar[bool] = True

    name: str
    level: str
    criterion: Criterion
    pass_at: float  # as written (on the numeric scale for one)
    pass_score: float  # the same on the 0..1 score scale
    tools: tuple[str, ...] = ()
    numeric: tuple[int, int] | None = None

    def evaluate(self, ctx: EvaluationContext) -> list[Verdict]:
        judge = judge_of(ctx.judge)
        targets = self._targets(ctx.trajectory)
        if not targets:
            return [self._nothing_to_judge(judge)]
        if judge is HEURISTIC:
            return [no_judge_verdict(self.name, t.target, t.what) for t in targets]
        return [self._judge(judge, t) for t in targets]

    def _nothing_to_judge(self, judge: Judge) -> Verdict:
        if self.level == "tool_call":
            which = f" matching {', '.join(self.tools)}" if self.tools else ""
            return not_evaluated(
                self.name,
                reasons.NO_TOOL_CALLS,
                f"the session made no tool call{which} to judge",
                judge=judge.name,
            )
        return not_evaluated(
            self.name,
            reasons.NO_OBSERVABLE_STEPS,
            "the session has no turn to judge",
            judge=judge.name,
        )

    def _request(
        self,
        steps: Sequence[Step],
        request: str | None,
        prior: tuple[str, ...],
        answer: str | None,
        call: Step | None = None,
    ) -> JudgeRequest:
        wanted = self.criterion.evidence
        shown_call = None
        if call is not None:
            shown_call = replace(
                call, result=call.result if "tool_results" in wanted else None, error=None
            )
        return JudgeRequest(
            kind="custom",
            criterion=self.criterion,
            request=request if "request" in wanted else None,
            prior_context=prior if "request" in wanted else (),
            steps=shown_steps(steps, wanted),
            final_answer=answer if "answer" in wanted else None,
            tool_call=shown_call,
        )

    def _targets(self, trajectory: Trajectory) -> list[_Target]:
        steps = trajectory.steps
        if self.level == "session":
            last = trajectory.last_turn
            target = Target(turn=None, span_id=last.span_id if last else None)
            prior = tuple(t.request for t in trajectory.turns[1:] if t.request)
            request = self._request(steps, trajectory.request, prior, trajectory.final_answer)
            return [_Target(target=target, what="the session", request=request)]
        if self.level == "turn":
            out = []
            earlier: list[str] = []
            for turn in trajectory.turns:
                own = [s for s in steps if s.turn == turn.index]
                request = self._request(own, turn.request, tuple(earlier), turn.final_answer)
                target = Target(turn=turn.index, span_id=turn.span_id)
                out.append(_Target(target=target, what=f"turn {turn.index}", request=request))
                if turn.request:
                    earlier.append(turn.request)
            return out
        out = []
        seen: dict[str, int] = {}
        for i, step in enumerate(steps):
            if step.kind != "tool_call" or not tool_matches(step.name, self.tools):
                continue
            seen[step.name] = seen.get(step.name, 0) + 1
            this_turn = next((t for t in trajectory.turns if t.index == step.turn), None)
            prior = tuple(t.request for t in trajectory.turns if t.index < step.turn and t.request)
            request = self._request(
                steps[: i + 1],
                this_turn.request if this_turn else trajectory.request,
                prior,
                this_turn.final_answer if this_turn else None,
                call=step,
            )
            target = Target(span_id=step.span_id, tool_call_id=step.tool_call_id, turn=step.turn)
            what = f"{step.name} call {seen[step.name]}"
            out.append(_Target(target=target, what=what, request=request))
        return out

    def _judge(self, judge: Judge, item: _Target) -> Verdict:
        answer = ask(judge, item.request)
        base = {"level": self.level}
        if isinstance(answer, JudgeError):
            verdict = error_verdict(self.name, judge, answer, item.target, item.what)
            return replace(verdict, details={**base, **(verdict.details or {})})
        ok = answer.score >= self.pass_score
        details: dict[str, Any] = {**base, **answer.details}
        if self.numeric is not None:
            details["value"] = int(answer.rating)
        own = (item.target.span_id,) if item.target.span_id else ()
        return Verdict(
            evaluator=self.name,
            outcome="pass" if ok else "fail",
            score=answer.score,
            label=answer.rating,
            explanation=(
                f"{item.what}: {answer.rating} ({'at or above' if ok else 'below'} pass_at "
                f"{self.pass_at:g}): {answer.rationale}"
            ),
            target=item.target,
            judge=judge.name,
            evidence=tuple(dict.fromkeys((*own, *answer.evidence))),
            details=details,
        )


def _scale(
    raw: Any, path: str, problems: list[str]
) -> tuple[tuple[ScalePoint, ...], tuple[int, int] | None]:
    if isinstance(raw, Mapping):
        low, high = raw.get("min"), raw.get("max")
        for key in raw:
            if key not in ("min", "max"):
                problems.append(f"{path}.{key}: unknown key (a numeric scale is {{min, max}})")
        if not all(type(v) is int for v in (low, high)):
            problems.append(f"{path}: expected whole numbers {{min: 1, max: 5}}, got {dict(raw)}")
            return (), None
        assert isinstance(low, int) and isinstance(high, int)
        if not 0 < high - low < MAX_NUMERIC_POINTS:
            problems.append(
                f"{path}: expected min below max, at most {MAX_NUMERIC_POINTS} points, "
                f"got min {low}, max {high}"
            )
            return (), None
        steps = tuple(
            ScalePoint(label=str(v), score=(v - low) / (high - low)) for v in range(low, high + 1)
        )
        return steps, (low, high)
    if not isinstance(raw, list) or len(raw) < 2:
        problems.append(
            f"{path}: expected at least two labels [{{label, score, definition}}, ...] or "
            f"{{min, max}}, got {raw!r}"
        )
        return (), None
    points: list[ScalePoint] = []
    labels: set[str] = set()
    for i, item in enumerate(raw):
        where = f"{path}[{i}]"
        if not isinstance(item, Mapping):
            problems.append(f"{where}: expected {{label, score, definition}}")
            continue
        for key in item:
            if key not in ("label", "score", "definition"):
                problems.append(f"{where}.{key}: unknown key (allowed: label, score, definition)")
        label = rating_key(item.get("label"))
        if label is None or not _LABEL.match(label):
            problems.append(
                f"{where}.label: expected a short word (letters, digits, _ or -), "
                f"got {item.get('label')!r}"
            )
            continue
        if label in labels:
            problems.append(f"{where}.label: {label!r} is already on the scale")
            continue
        score = item.get("score")
        if not isinstance(score, (int, float)) or isinstance(score, bool) or not 0 <= score <= 1:
            problems.append(f"{where}.score: expected a number from 0 to 1, got {score!r}")
            continue
        definition = item.get("definition", "")
        if not isinstance(definition, str):
            problems.append(f"{where}.definition: expected text, got {definition!r}")
            continue
        labels.add(label)
        points.append(ScalePoint(label=label, score=float(score), definition=definition.strip()))
    return tuple(points), None


def parse_evidence(
    raw: Any, path: str, problems: list[str], default: tuple[str, ...] = DEFAULT_EVIDENCE
) -> tuple[str, ...]:
    """An ``evidence`` option: which of `EVIDENCE` the judge is shown (``default`` when not
    given); every unknown item is named."""
    if raw is None:
        return default
    if not isinstance(raw, list) or not raw:
        problems.append(f"{path}: expected a list of {', '.join(EVIDENCE)}")
        return default
    out = []
    for item in raw:
        if item not in EVIDENCE:
            hint = did_you_mean(str(item), EVIDENCE)
            problems.append(
                f"{path}: unknown evidence {item!r}{hint} (known: {', '.join(EVIDENCE)})"
            )
        elif item not in out:
            out.append(item)
    return tuple(out)


def _one(
    raw: Any, path: str, problems: list[str], taken: Collection[str]
) -> CustomEvaluator | None:
    if not isinstance(raw, Mapping):
        problems.append(f"{path}: expected a mapping with name, instructions and scale")
        return None
    before = len(problems)
    for key in raw:
        if key not in KEYS:
            problems.append(
                f"{path}.{key}: unknown key{did_you_mean(str(key), KEYS)} (allowed: "
                f"{', '.join(KEYS)})"
            )
    name = raw.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        problems.append(
            f"{path}.name: expected a lowercase name such as refund_policy, got {name!r}"
        )
    elif name in RESERVED:
        problems.append(
            f"{path}.name: {name!r} is reserved (evaluators.{name} is a section of its own); "
            "choose another"
        )
    elif name in taken:
        problems.append(
            f"{path}.name: {name!r} is taken by a built-in or another evaluator; choose another"
        )
    level = raw.get("level", "session")
    if level not in LEVELS:
        problems.append(f"{path}.level: expected one of {', '.join(LEVELS)}, got {level!r}")
    instructions = raw.get("instructions")
    if not isinstance(instructions, str) or not instructions.strip():
        problems.append(f"{path}.instructions: required, the question the judge answers")
    if "scale" not in raw:
        problems.append(f"{path}.scale: required, labels with scores or {{min, max}}")
        points: tuple[ScalePoint, ...] = ()
        numeric: tuple[int, int] | None = None
    else:
        points, numeric = _scale(raw["scale"], f"{path}.scale", problems)
    evidence = parse_evidence(raw.get("evidence"), f"{path}.evidence", problems)
    judge = raw.get("judge")
    if judge is not None and (not isinstance(judge, str) or not judge.strip()):
        problems.append(f"{path}.judge: expected the name of a judge under `judges:`")
    tools = raw.get("tools")
    if tools is not None:
        if level != "tool_call":
            problems.append(f"{path}.tools: only for level tool_call (which calls to judge)")
        elif not isinstance(tools, list) or not all(isinstance(t, str) and t for t in tools):
            problems.append(f'{path}.tools: expected a list of tool name globs, e.g. ["issue_*"]')
    pass_at = raw.get("pass_at")
    pass_score = 0.5
    if numeric is not None:
        low, high = numeric
        pass_at = (low + high) / 2 if pass_at is None else pass_at
        if type(pass_at) not in (int, float) or not low <= pass_at <= high:
            problems.append(
                f"{path}.pass_at: expected a number from {low} to {high}, got {pass_at!r}"
            )
        else:
            pass_score = (pass_at - low) / (high - low)
    else:
        pass_at = 0.5 if pass_at is None else pass_at
        if type(pass_at) not in (int, float) or not 0 <= pass_at <= 1:
            problems.append(f"{path}.pass_at: expected a score from 0 to 1, got {pass_at!r}")
        else:
            pass_score = float(pass_at)
    if points and len(problems) == before:
        passing = [p.label for p in points if p.score >= pass_score]
        if not passing or len(passing) == len(points):
            every = "passes" if passing else "fails"
            problems.append(
                f"{path}.pass_at: every label of the scale {every} at {pass_at:g}; "
                "set it between the scores"
            )
    if len(problems) > before:
        return None
    assert isinstance(name, str) and isinstance(instructions, str)
    return CustomEvaluator(
        name=name,
        level=str(level),
        criterion=Criterion(
            name=name, instructions=instructions.strip(), scale=points, evidence=evidence
        ),
        pass_at=float(pass_at),
        pass_score=pass_score,
        tools=tuple(tools or ()),
        numeric=numeric,
    )


def parse_custom(
    raw: Any, path: str, problems: list[str], taken: Collection[str]
) -> list[CustomEvaluator]:
    """Validate ``evaluators.custom``; ``taken``: the names of the other evaluators."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        problems.append(f"{path}: expected a list of custom evaluators (name, instructions, scale)")
        return []
    built: list[CustomEvaluator] = []
    names = set(taken)
    for i, item in enumerate(raw):
        evaluator = _one(item, f"{path}[{i}]", problems, names)
        if evaluator is not None:
            names.add(evaluator.name)
            built.append(evaluator)
        elif isinstance(item, Mapping) and isinstance(item.get("name"), str):
            names.add(item["name"])
    return built
