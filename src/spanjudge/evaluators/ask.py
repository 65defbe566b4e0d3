"""The bridge evaluators use: ask a judge, turn a failed judgement into a `judge_error` verdict."""

from __future__ import annotations

from typing import TYPE_CHECKING

from spanjudge.errors import JudgeError
from spanjudge.judges.base import Judgement, JudgeRequest
from spanjudge.judges.budget import USAGE_KEY
from spanjudge.judges.heuristic import HEURISTIC
from spanjudge.reasons import (
    ARGUMENTS_NOT_RECORDED,
    JUDGE_BUDGET,
    JUDGE_ERROR,
    NO_CATALOGUE,
    NO_OBSERVABLE_STEPS,
    NO_REQUEST,
    NO_TOOL_CALLS,
)
from spanjudge.values import Target, Verdict, not_evaluated

if TYPE_CHECKING:
    from spanjudge.judges.base import Judge

_MISSING_EVIDENCE = frozenset(
    {NO_CATALOGUE, NO_REQUEST, NO_OBSERVABLE_STEPS, ARGUMENTS_NOT_RECORDED, NO_TOOL_CALLS}
)
# Failures that keep their own reason code: missing evidence (the judge did not fail) and a
# spent budget (judges/budget.py: the judge was not asked).
_OWN_REASON = _MISSING_EVIDENCE | {JUDGE_BUDGET}


def judge_of(candidate: object) -> Judge:
    """The context's judge, or the heuristic judge when none is configured."""
    # Duck-typed on purpose: isinstance against a runtime Protocol is slow on this per-verdict path.
    if candidate is not None and callable(getattr(candidate, "judge", None)):
        return candidate  # type: ignore[return-value]
    return HEURISTIC


def ask(judge: Judge, request: JudgeRequest) -> Judgement | JudgeError:
    """Never raises: any failure comes back as a `JudgeError` carrying an ``error_type``."""
    try:
        return judge.judge(request)
    except JudgeError as exc:
        return exc
    except Exception as exc:  # a judge bug or an unexpected client error: unscored, not a crash
        return JudgeError(f"{type(exc).__name__}: {exc}", error_type=type(exc).__name__)


def error_verdict(
    evaluator: str, judge: Judge, error: JudgeError, target: Target, what: str
) -> Verdict:
    """``not_evaluated`` / ``judge_error``: never a pass, never a 0.0. Missing evidence the judge
    needed (no catalogue, no request) keeps its own reason code: the judge did not fail; so does
    a spent budget (``judge_budget``). What a failed judgement still cost is in its details."""
    return not_evaluated(
        evaluator,
        error.error_type if error.error_type in _OWN_REASON else JUDGE_ERROR,
        f"{what}: judge {judge.name} gave no judgement: {error}",
        target=target,
        judge=judge.name,
        error_type=error.error_type,
        evidence=(target.span_id,) if target.span_id else (),
        details={USAGE_KEY: error.usage} if error.usage else None,
    )
