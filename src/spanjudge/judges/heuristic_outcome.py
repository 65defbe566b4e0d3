"""The heuristic judge's outcome question: does the final answer agree with the reference?

Numbers first (every figure of the reference must be in the answer), words otherwise; and an
answer is no better than what backs it: a file it points to must hold its figures, and it must not
claim a path the reference does not.
"""

from __future__ import annotations

import re

from spanjudge.errors import JudgeError
from spanjudge.judges.base import BINARY, Judgement, JudgeRequest
from spanjudge.judges.text import tokens

NAME = "heuristic"
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")
_PATH = re.compile(r"(?<![\w/])(?:\.{0,2}/)?(?:[\w.-]+/)+[\w.-]+\.\w+")


def judge_outcome(request: JudgeRequest) -> Judgement:
    """Does the final answer agree with the reference answer? Numbers first, then words."""
    reference = request.reference_answer
    answer = request.final_answer
    if not reference or not answer:
        raise JudgeError("needs a final answer and a reference answer", error_type="no_reference")
    want_numbers = _numbers(reference)
    if want_numbers:
        missing = sorted(want_numbers - _numbers(answer))
        ok = not missing
        why = (
            f"every number of the reference ({', '.join(map(_fmt, sorted(want_numbers)))}) "
            "appears in the final answer"
            if ok
            else f"the final answer lacks {', '.join(map(_fmt, missing))} from the reference"
        )
        hollow = _hollow_file(request, answer, want_numbers) if ok else None
        if hollow:
            # The right figures in the reply, but the file it points to holds none of them.
            ok = False
            why = (
                f"the final answer points to {hollow}, but what the agent wrote there holds "
                "none of the reference's figures"
            )
    else:
        want = tokens(reference)
        got = tokens(answer)
        recall = len(want & got) / len(want) if want else 0.0
        ok = recall >= 0.6
        why = f"{recall:.0%} of the reference's content words appear in the final answer"
    extra = sorted(_paths(answer) - _paths(reference)) if _paths(reference) else []
    if ok and extra:
        ok = False
        why = f"the final answer also claims {', '.join(extra)}, which the reference does not"
    rating = "yes" if ok else "no"
    return Judgement(rating=rating, score=BINARY[rating], rationale=why, judge=NAME)


def _hollow_file(request: JudgeRequest, answer: str, figures: set[float]) -> str | None:
    """A path the answer names whose last write (a successful call with that path and text to
    write among its arguments) carries none of ``figures``."""
    for path in sorted(_paths(answer)):
        written = None
        for step in request.steps:
            args = step.arguments
            if step.kind != "tool_call" or step.failed or not isinstance(args, dict):
                continue
            values = [v for v in args.values() if isinstance(v, str)]
            if any(v.strip() == path for v in values):
                # Content, not another option: text with a space or a line break in it.
                texts = [v for v in values if v.strip() != path and any(c.isspace() for c in v)]
                if texts:
                    written = " ".join(texts)
        if written is not None and not figures & _numbers(written):
            return path
    return None


def _paths(text: str) -> set[str]:
    return {m.rstrip(".,;:") for m in _PATH.findall(text)}


def _numbers(text: str) -> set[float]:
    found = set()
    for raw in _NUMBER.findall(text):
        try:
            found.add(float(raw.replace(",", "")))
        except ValueError:
            continue
    return found


def _fmt(value: float) -> str:
    return str(int(value)) if value.is_integer() else str(value)
