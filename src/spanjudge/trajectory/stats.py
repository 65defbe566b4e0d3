"""Trajectory statistics exactly as ARCHITECTURE.md section 4 defines them."""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter

from spanjudge.spans.record import SpanRecord
from spanjudge.trajectory.effects import DEFAULT_EFFECT_MAP, EffectMap
from spanjudge.trajectory.model import Stats
from spanjudge.trajectory.steps import Step


def retries(steps: Sequence[Step]) -> list[Step]:
    """Calls whose previous call to the same tool in the session failed."""
    last_failed: dict[str, bool] = {}
    out = []
    for step in steps:
        if step.kind not in ("tool_call", "skill_load"):
            continue
        if last_failed.get(step.name):
            out.append(step)
        last_failed[step.name] = step.failed
    return out


def backtracks(steps: Sequence[Step], effects: EffectMap = DEFAULT_EFFECT_MAP) -> list[Step]:
    """Successful deletes of a resource that an earlier successful call in the session created
    or wrote (a failed delete undid nothing)."""
    written: set[str] = set()
    out = []
    for step in steps:
        if step.kind != "tool_call":
            continue
        effect = effects.effect(step.name)
        if effect not in ("create", "modify", "delete"):
            continue  # reads and external calls neither write nor undo anything
        resource = effects.resource(step.arguments)
        if resource is None:
            continue
        if effect in ("create", "modify") and not step.failed:
            written.add(resource)
        elif effect == "delete" and resource in written and not step.failed:
            out.append(step)
            written.discard(resource)
    return out


_START = attrgetter("start_unix_nano")
_END = attrgetter("end_unix_nano")


def compute_stats(
    steps: Sequence[Step],
    spans: Sequence[SpanRecord],
    turns: int,
    effects: EffectMap = DEFAULT_EFFECT_MAP,
) -> tuple[Stats, list[Step], list[Step]]:
    retried = retries(steps)
    undone = backtracks(steps, effects)
    tool_calls = errors = model_calls = skill_loads = 0
    # token counts: the sum of those recorded, None when no model call recorded any
    input_tokens: int | None = None
    output_tokens: int | None = None
    for s in steps:  # one pass counts every kind
        kind = s.kind
        if kind == "tool_call":
            tool_calls += 1
            if s.failed:
                errors += 1
        elif kind == "model_call":
            model_calls += 1
            if s.input_tokens is not None:
                input_tokens = (input_tokens or 0) + s.input_tokens
            if s.output_tokens is not None:
                output_tokens = (output_tokens or 0) + s.output_tokens
        elif kind == "skill_load" and s.activation_of is None:
            skill_loads += 1 + len(s.also_loaded)
    start = min(map(_START, spans), default=0)
    end = max(map(_END, spans), default=0)
    stats = Stats(
        turns=turns,
        tool_calls=tool_calls,
        skill_loads=skill_loads,
        model_calls=model_calls,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        duration_s=max(0, end - start) / 1e9,
        errors=errors,
        retries=len(retried),
        backtracks=len(undone),
    )
    return stats, retried, undone
