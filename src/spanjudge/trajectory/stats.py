"""Trajectory statistics exactly as ARCHITECTURE.md section 4 defines them."""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter

from spanjudge.spans.record import SpanRecord
from spanjudge.trajectory.effects import DEFAULT_EFFECT_MAP, EffectMap
from spanjudge.trajectory.model import Stats
from spanjudge.trajectory.steps import Step

_START = attrgetter("start_unix_nano")
_END = attrgetter("end_unix_nano")


def compute_stats(
    steps: Sequence[Step],
    spans: Sequence[SpanRecord],
    turns: int,
    effects: EffectMap = DEFAULT_EFFECT_MAP,
) -> tuple[Stats, tuple[str, ...], tuple[str, ...]]:
    """The statistics and the span ids of the retries and the backtracks, in one pass.

    A retry is a call (tool call or skill load) whose previous call to the same tool in the
    session failed. A backtrack is a successful delete of a resource that an earlier successful
    call in the session created or wrote (a failed delete undid nothing; reads and external
    calls neither write nor undo anything)."""
    last_failed: dict[str, bool] = {}
    written: set[str] = set()
    retried: list[str] = []
    undone: list[str] = []
    tool_calls = errors = model_calls = skill_loads = 0
    # token counts by turn: the sum of those its model calls recorded, or the turn's own
    # (the run's totals) where they are more: some of its model calls went untraced
    counted: dict[int, list[int | None]] = {}  # turn -> [model in, model out, own in, own out]
    for s in steps:  # one pass counts every kind
        kind = s.kind
        if kind == "tool_call" or kind == "skill_load":
            failed = s.failed
            name = s.name
            if last_failed.get(name):
                retried.append(s.span_id)
            last_failed[name] = failed
            if kind == "skill_load":
                if s.activation_of is None:
                    skill_loads += 1 + len(s.also_loaded)
                continue
            tool_calls += 1
            if failed:
                errors += 1
                continue  # a failed call neither writes nor undoes anything
            effect = effects.effect(name)
            if effect == "create" or effect == "modify":
                resource = effects.resource(s.arguments)
                if resource is not None:
                    written.add(resource)
            elif effect == "delete":
                resource = effects.resource(s.arguments)
                if resource is not None and resource in written:
                    undone.append(s.span_id)
                    written.discard(resource)
        elif kind == "model_call":
            model_calls += 1
            if s.input_tokens is not None or s.output_tokens is not None:
                turn = counted.setdefault(s.turn, [None, None, None, None])
                turn[0] = _plus(turn[0], s.input_tokens)
                turn[1] = _plus(turn[1], s.output_tokens)
        elif kind == "agent_turn" and (s.input_tokens is not None or s.output_tokens is not None):
            turn = counted.setdefault(s.turn, [None, None, None, None])
            turn[2] = turn[2] if turn[2] is not None else s.input_tokens
            turn[3] = turn[3] if turn[3] is not None else s.output_tokens
    input_tokens = output_tokens = None
    for model_in, model_out, own_in, own_out in counted.values():
        input_tokens = _plus(input_tokens, _most(model_in, own_in))
        output_tokens = _plus(output_tokens, _most(model_out, own_out))
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
    return stats, tuple(retried), tuple(undone)


def _plus(total: int | None, count: int | None) -> int | None:
    """``total`` with ``count`` added; None while neither is a count."""
    return total if count is None else (total or 0) + count


def _most(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)
