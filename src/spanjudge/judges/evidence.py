"""What each question needs before any judge is asked: the same answer for every judge.

A question whose evidence was never recorded (no catalogue to choose from, no request) has no
right answer; an LLM asked anyway guesses one (it scored "no catalogue" selections as fails). The
heuristic and the networked judges both check here first, so the verdict is the same
``not_evaluated`` reason whichever judge is configured, and no tokens are spent on it.
"""

from __future__ import annotations

from spanjudge.errors import JudgeError
from spanjudge.judges.base import JudgeRequest
from spanjudge.judges.text import parse_skill


def check_evidence(request: JudgeRequest) -> None:
    """Raise `JudgeError` (``error_type`` = the reason code) when ``request`` cannot be judged."""
    kind = request.kind
    if kind in ("skill_selection", "skill_omission") and not request.request:
        raise JudgeError("no user request recorded", error_type="no_request")
    if kind == "skill_omission" and not request.catalogue:
        raise JudgeError("no skill catalogue recorded", error_type="no_catalogue")
    if kind == "skill_selection" and not request.catalogue:
        described = parse_skill(request.skill_body).description if request.skill_body else None
        if not described:
            # A bare name is no evidence either way: judging it would be a guess.
            raise JudgeError(
                "no skill catalogue and no skill description recorded", error_type="no_catalogue"
            )
    if kind == "instruction_following" and not request.skill_body:
        raise JudgeError("the SKILL.md body was not recorded", error_type="body_not_recorded")
    if kind == "outcome" and not (request.reference_answer and request.final_answer):
        raise JudgeError("needs a final answer and a reference answer", error_type="no_reference")
    if kind in ("tool_selection", "tool_parameters"):
        if request.tool_call is None:
            raise JudgeError("no tool call to judge", error_type="no_tool_calls")
        if not request.request:
            raise JudgeError("no user request recorded", error_type="no_request")
    if kind == "tool_parameters" and request.tool_call and request.tool_call.arguments is None:
        raise JudgeError(
            f"the arguments of {request.tool_call.name!r} were not recorded",
            error_type="arguments_not_recorded",
        )
