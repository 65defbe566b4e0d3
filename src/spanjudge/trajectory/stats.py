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


def _sum(values: list[int | None]) -> int | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def compute_stats(
    steps: Sequence[Step],
    spans: Sequence[SpanRecord],
    turns: int,
    effects: EffectMap = DEFAULT_EFFECT_MAP,
) -> tuple[Stats, list[Step], list[Step]]:
    model_calls = [s for s in steps if s.kind == "model_call"]
    tool_calls = [s for s in steps if s.kind == "tool_call"]
    retried = retries(steps)
    undone = backtracks(steps, effects)
    start = min(map(attrgetter("start_unix_nano"), spans), default=0)
    end = max(map(attrgetter("end_unix_nano"), spans), default=0)
    stats = Stats(
        turns=turns,
        tool_calls=len(tool_calls),
        skill_loads=sum(
            1 + len(s.also_loaded)
            for s in steps
            if s.kind == "skill_load" and s.activation_of is None
        ),
        model_calls=len(model_calls),
        input_tokens=_sum([s.input_tokens for s in model_calls]),
        output_tokens=_sum([s.output_tokens for s in model_calls]),
        duration_s=max(0, end - start) / 1e9,
        errors=sum(1 for s in tool_calls if s.failed),
        retries=len(retried),
        backtracks=len(undone),
    )
    return stats, retried, undone
