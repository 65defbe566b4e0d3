"""Which model output may be a session's final answer: the evidence rules every preset shares
(ARCHITECTURE.md section 2), beside the tool-call rules in `evidence`."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from spanjudge.trajectory.hidden import hidden
from spanjudge.trajectory.model import Trajectory
from spanjudge.trajectory.steps import Step


def may_answer(step: Step, stop_reasons: frozenset[str], *, default_reason: str = "stop") -> bool:
    """A model output can be the final answer: text, a stop finish reason, and no tool asked
    for (instrumentations write `stop` on tool-calling outputs too, so the reason alone is no
    evidence)."""
    return (
        step.kind == "model_call"
        and bool(step.text and step.text.strip())
        and not step.tool_requests
        and (step.finish_reason or default_reason).lower() in stop_reasons
    )


def aborted_after(step: Step, turns: Iterable[Step]) -> bool:
    """The run failed after ``step``: an agent span of its trace ended later with error status
    (an aborted run has no final answer, whatever the model said on the way)."""
    return any(
        t.status == "error"
        and t.trace_id == step.trace_id
        and t.end_unix_nano >= step.end_unix_nano
        for t in turns
    )


def without_hidden_text(trajectory: Trajectory) -> Trajectory:
    """A hidden answer or request is no text: the turn and the session report none (outcome
    then says it cannot judge, judges that need the request say none was recorded), and no
    earlier model text stands in for a hidden answer."""
    turns = trajectory.turns
    if not any(hidden(t.final_answer) or hidden(t.request) for t in turns) and not hidden(
        trajectory.final_answer
    ):
        return trajectory
    return replace(
        trajectory,
        turns=tuple(
            replace(
                t,
                final_answer=None if hidden(t.final_answer) else t.final_answer,
                request=None if hidden(t.request) else t.request,
            )
            for t in turns
        ),
        final_answer=None if hidden(trajectory.final_answer) else trajectory.final_answer,
    )
