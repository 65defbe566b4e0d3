"""`trajectory_match`: are the session's tool calls the ones its reference trajectory lists?
(ARCHITECTURE.md section 5). Deterministic: no judge.

The reference comes from the session's expectations (``trajectory:``, parsed by
`spanjudge.trajectory.reference`). Without one the verdict is ``not_evaluated`` /
``no_trajectory``, outside coverage like ``outcome``'s ``no_condition``.

What is compared: every recorded tool call, in order, and a skill load only where the reference
lists it (``{skill: name}``, whichever tool loaded it, or the loader's tool name): skill loads are
`skill_loaded`'s question unless the reference makes them part of the trajectory. Failed calls
count (the call was made). Tool names compare by the one rule (`trajectory/toolnames.py`): the
exact name, then the base name after a namespace separator. A listed call with ``arguments``
matches only a call whose recorded arguments hold them (each key present with an equal JSON
value: true is no 1, 1.0 is 1; a nested mapping is a subset too).

Modes:
- ``exact``: the calls are the reference, one for one, in its order, nothing else;
- ``in_order``: the reference's calls appear in its order; other calls may come between;
- ``any_order``: each of the reference's calls appears, in any order; others may come too.

The details list the ``missing`` calls (listed, never made), the ``extra`` calls (made, not
listed; a failure only for ``exact``) and the ``out_of_order`` ones (listed and made, but not
where the order needs them; never for ``any_order``; where either of two calls could be the
one out of place, the one listed earlier keeps its place). The score is the share matched in place:
matched / listed (``exact``: / the larger of listed and made).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from spanjudge import reasons
from spanjudge.evaluators.base import EvaluationContext, fixed_not_evaluated, unknown_options
from spanjudge.spans import jsonfast
from spanjudge.trajectory.model import Trajectory
from spanjudge.trajectory.reference import ReferenceCall, ReferenceTrajectory
from spanjudge.trajectory.toolnames import same_tool
from spanjudge.values import Verdict, not_evaluated, skill_key

NAME = reasons.TRAJECTORY_MATCH
_SHOWN = 5  # calls named in the explanation; the details list them all
_MAX_CELLS = 1_000_000  # reference entries x recorded calls aligned exactly (memory: one int each)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Call:
    """One recorded call as compared: a tool call, or one skill a load step loaded."""

    tool: str
    skill: str | None  # the skill loaded (None: a tool call, or a load's activation read)
    load: bool
    arguments: Any
    span_id: str
    tool_call_id: str | None
    turn: int

    def to_json(self, position: int) -> dict[str, Any]:
        out: dict[str, Any] = {"tool": self.tool, "position": position, "span_id": self.span_id}
        if self.skill is not None:
            out["skill"] = self.skill
        if self.tool_call_id:
            out["tool_call_id"] = self.tool_call_id
        return out


def _decoded(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return jsonfast.parse(arguments)
        except ValueError:  # not JSON, or nested deeper than json reads
            return arguments
    return arguments


def _holds(expected: Any, recorded: Any) -> bool:
    """``recorded`` holds ``expected``: a mapping holds a subset of its keys, each holding its
    value; anything else is the same JSON value (`_same`)."""
    if isinstance(expected, Mapping):
        return isinstance(recorded, Mapping) and all(
            key in recorded and _holds(value, recorded[key]) for key, value in expected.items()
        )
    return _same(expected, recorded)


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON values: true/false are no numbers (Python's ``True == 1`` is not JSON's),
    1 and 1.0 are the same number, lists equal item by item, mappings key by key."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, Mapping) or isinstance(b, Mapping):
        return (
            isinstance(a, Mapping)
            and isinstance(b, Mapping)
            and a.keys() == b.keys()
            and all(_same(a[k], b[k]) for k in a)
        )
    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
        return (
            isinstance(a, (list, tuple))
            and isinstance(b, (list, tuple))
            and len(a) == len(b)
            and all(_same(x, y) for x, y in zip(a, b, strict=True))
        )
    return bool(a == b)


def _names(entry: ReferenceCall, call: _Call) -> bool:
    """``entry`` names ``call`` (arguments aside)."""
    if entry.skill is not None:
        return call.skill is not None and skill_key(call.skill) == skill_key(entry.skill)
    return entry.tool is not None and same_tool(call.tool, entry.tool)


def _matches(entry: ReferenceCall, call: _Call) -> bool:
    if not _names(entry, call):
        return False
    if not entry.arguments:
        return True
    args = _decoded(call.arguments)
    return isinstance(args, Mapping) and _holds(dict(entry.arguments), args)


def recorded_calls(trajectory: Trajectory, reference: ReferenceTrajectory) -> list[_Call]:
    """The session's calls as compared with ``reference``: every tool call, and the skill
    loads the reference lists."""
    out: list[_Call] = []
    for step in trajectory.steps:
        if step.kind == "tool_call":
            out.append(_call(step.name, None, False, step))
        elif step.kind == "skill_load":
            # a lazy loader's SKILL.md read completes its load: one load, counted by that load
            skills: list[str | None] = [step.skill or ""] if step.activation_of is None else [None]
            skills += [name for name, _ in step.also_loaded]
            for skill in skills:
                call = _call(step.name, skill, True, step)
                if any(_names(entry, call) for entry in reference.calls):
                    out.append(call)
    return out


def _call(tool: str, skill: str | None, load: bool, step: Any) -> _Call:
    return _Call(
        tool=tool,
        skill=skill,
        load=load,
        arguments=step.arguments,
        span_id=step.span_id,
        tool_call_id=step.tool_call_id,
        turn=step.turn,
    )


def _in_order(expected: Sequence[ReferenceCall], calls: Sequence[_Call]) -> list[tuple[int, int]]:
    """The longest run of (entry, call) pairs in the order of both (LCS). Past `_MAX_CELLS`
    (a runaway session's thousands of calls) the pairs are taken greedily, each entry with the
    first fitting call after the last: memory stays bounded and pass or fail is the same (a
    reference that is a subsequence of the calls is found whole either way); only a failing
    verdict's details may name other calls."""
    n, m = len(expected), len(calls)
    if n * m > _MAX_CELLS:
        pairs, i = [], 0
        for j, call in enumerate(calls):
            if i < n and _matches(expected[i], call):
                pairs.append((i, j))
                i += 1
        return pairs
    best = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            if _matches(expected[i], calls[j]):
                best[i][j] = best[i + 1][j + 1] + 1
            else:
                best[i][j] = max(best[i + 1][j], best[i][j + 1])
    pairs = []
    i = j = 0
    while i < n and j < m:
        if _matches(expected[i], calls[j]) and best[i][j] == best[i + 1][j + 1] + 1:
            pairs.append((i, j))
            i, j = i + 1, j + 1
        elif best[i][j + 1] >= best[i + 1][j]:  # on a tie the earlier listed call stays
            j += 1
        else:
            i += 1
    return pairs


def _any_order(expected: Sequence[ReferenceCall], calls: Sequence[_Call]) -> list[tuple[int, int]]:
    """The most (entry, call) pairs regardless of order (bipartite matching, augmenting
    paths): a call named by two entries goes where it leaves the others something. Past
    `_MAX_CELLS` each entry takes the first free call it names, entries with arguments first
    (the more particular ones), so cost and memory stay linear in the calls."""
    if len(expected) * len(calls) > _MAX_CELLS:
        taken: set[int] = set()
        pairs = []
        for i in sorted(range(len(expected)), key=lambda i: not expected[i].arguments):
            j = next(
                (j for j, c in enumerate(calls) if j not in taken and _matches(expected[i], c)),
                None,
            )
            if j is not None:
                taken.add(j)
                pairs.append((i, j))
        return sorted(pairs)
    fits = [[j for j, call in enumerate(calls) if _matches(entry, call)] for entry in expected]
    owner: dict[int, int] = {}  # call -> entry

    def place(i: int, seen: set[int]) -> bool:
        for j in fits[i]:
            if j in seen:
                continue
            seen.add(j)
            if j not in owner or place(owner[j], seen):
                owner[j] = i
                return True
        return False

    for i in range(len(expected)):
        place(i, set())
    return sorted((i, j) for j, i in owner.items())


def _differs(entry: ReferenceCall, call: _Call) -> dict[str, Any]:
    """How a same-named call's arguments differ from what ``entry`` expects."""
    args = _decoded(call.arguments)
    out: dict[str, Any] = {}
    for key, want in entry.arguments.items():
        got = args.get(key) if isinstance(args, Mapping) else None
        present = isinstance(args, Mapping) and key in args
        if not present or not _holds(want, got):
            out[key] = {"expected": want, "recorded": got if present else None}
    return out


def _listed(items: Sequence[str]) -> str:
    shown = ", ".join(items[:_SHOWN])
    return shown + (f" and {len(items) - _SHOWN} more" if len(items) > _SHOWN else "")


@dataclass(frozen=True, slots=True, kw_only=True)
class TrajectoryMatch:
    name: str = NAME

    @classmethod
    def from_options(
        cls, options: Mapping[str, Any], path: str, problems: list[str]
    ) -> TrajectoryMatch:
        unknown_options(options, (), path, problems)
        return cls()

    def evaluate(self, ctx: EvaluationContext) -> list[Verdict]:
        reference = ctx.expectation.trajectory
        if reference is None:
            return [
                fixed_not_evaluated(
                    NAME,
                    reasons.NO_TRAJECTORY,
                    "no reference trajectory: set `trajectory: {tools: [...], match: ...}` in "
                    "the session's expectations",
                )
            ]
        return [compare(ctx.trajectory, reference)]


def compare(trajectory: Trajectory, reference: ReferenceTrajectory) -> Verdict:
    """The verdict of ``trajectory`` against ``reference``."""
    expected = reference.calls
    calls = recorded_calls(trajectory, reference)
    unrecorded = [
        call
        for call in calls
        if call.arguments is None and any(e.arguments and _names(e, call) for e in expected)
    ]
    if unrecorded:
        return not_evaluated(
            NAME,
            reasons.ARGUMENTS_NOT_RECORDED,
            f"the reference expects arguments of {_listed([c.tool for c in unrecorded])}, "
            "and the trace does not record them (content capture off)",
            evidence=tuple(dict.fromkeys(c.span_id for c in unrecorded)),
        )
    mode = reference.match
    pairs = _any_order(expected, calls) if mode == "any_order" else _in_order(expected, calls)
    paired_entries = {i for i, _ in pairs}
    paired_calls = {j for _, j in pairs}
    out_of_order: list[dict[str, Any]] = []
    if mode != "any_order":  # a listed call made, but not where the order needs it
        for i, entry in enumerate(expected):
            if i in paired_entries:
                continue
            j = next(
                (j for j, c in enumerate(calls) if j not in paired_calls and _matches(entry, c)),
                None,
            )
            if j is not None:
                paired_entries.add(i)
                paired_calls.add(j)
                out_of_order.append(
                    {"expected": entry.describe(), "expected_position": i, **calls[j].to_json(j)}
                )
    extra_calls = [j for j in range(len(calls)) if j not in paired_calls]
    missing = []
    for i, entry in enumerate(expected):
        if i in paired_entries:
            continue
        item: dict[str, Any] = {"expected": entry.describe(), "position": i}
        near = next((j for j in extra_calls if _names(entry, calls[j])), None)
        if near is not None and entry.arguments:
            item["arguments_differ"] = {**calls[near].to_json(near), **_differs(entry, calls[near])}
        missing.append(item)
    extra = [calls[j].to_json(j) for j in extra_calls]
    if mode == "exact":
        score = len(pairs) / max(len(expected), len(calls)) if expected or calls else 1.0
        ok = not missing and not extra and not out_of_order
    else:
        score = len(pairs) / len(expected) if expected else 1.0
        ok = not missing and not out_of_order
    details = {
        "match": mode,
        "expected": [e.describe() for e in expected],
        "recorded": [c.tool if c.skill is None else f"skill {c.skill}" for c in calls],
        "missing": missing,
        "extra": extra,
        "out_of_order": out_of_order,
    }
    evidence = tuple(dict.fromkeys(c.span_id for c in calls))
    problems = []
    if missing:
        problems.append(f"missing {_listed([m['expected'] for m in missing])}")
    if out_of_order:
        problems.append(f"out of order {_listed([o['expected'] for o in out_of_order])}")
    if extra and mode == "exact":
        problems.append(f"extra {_listed([e['tool'] for e in extra])}")
    if not ok and not trajectory.complete and missing and len(problems) == 1:
        return not_evaluated(
            NAME,
            reasons.SESSION_INCOMPLETE,
            f"{mode}: {problems[0]}, and the session closed early: they may still come",
            evidence=evidence,
            details=details,
        )
    summary = f"{len(pairs)} of {len(expected)} listed calls matched in place ({mode})"
    if ok:
        plural = "call" if len(extra) == 1 else "calls"
        tail = f"; {len(extra)} further {plural} allowed by {mode}" if extra else ""
        explanation = f"{summary}{tail}"
    else:
        explanation = f"{summary}: {'; '.join(problems)}"
    return Verdict(
        evaluator=NAME,
        outcome="pass" if ok else "fail",
        score=score,
        label="match" if ok else "mismatch",
        explanation=explanation,
        judge="rule",
        evidence=evidence,
        details=details,
    )
