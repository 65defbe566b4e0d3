"""Session spans + recognised steps -> `Trajectory` (turns, ordering, final answer, stats)."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from operator import attrgetter
from typing import Any

from spanjudge import semconv
from spanjudge.spans import jsonfast
from spanjudge.spans.record import SpanRecord
from spanjudge.trajectory.effects import DEFAULT_EFFECT_MAP, EffectMap
from spanjudge.trajectory.model import SkillLoad, Trajectory, Turn
from spanjudge.trajectory.skills import EMPTY_LIBRARY, SkillLibrary
from spanjudge.trajectory.stats import compute_stats
from spanjudge.trajectory.steps import (
    SKILLS_DIRECTORY,
    TRACE_LAYOUT,
    CatalogueEntry,
    CatalogueSource,
    Step,
)

_START = attrgetter("start_unix_nano")
_KIND = attrgetter("kind")
_TURN = attrgetter("turn")
_TRACE_ID = attrgetter("trace_id")
_TRUNCATED = attrgetter("truncated")
# Finish reasons that end a turn (OTel `stop`, Strands/Anthropic `end_turn`, Gemini `STOP`, ...)
STOP_REASONS = frozenset(
    {"stop", "end_turn", "complete", "completed", "finish", "eos", "stop_sequence"}
)
# spanjudge's own session attributes (`_session_attrs`), on a span or its resource; on a span
# also inside OpenInference `metadata` JSON
_SESSION_KEYS_IN_ORDER = (semconv.SJ_EXPECTED_SKILLS, semconv.SJ_TASK_ID, semconv.SJ_RUN_SEED)
_SESSION_KEYS = frozenset(_SESSION_KEYS_IN_ORDER)
_SESSION_KEYS_OR_METADATA = _SESSION_KEYS | {semconv.OI_METADATA}


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionMeta:
    """What session assembly knows about a session besides its spans."""

    session_id: str
    key_source: str
    complete: bool
    revision: int = 1
    close_reason: str = "end_of_input"
    # log records read as content of the session's spans, and those whose span never came
    log_records: int = 0
    log_records_unjoined: int = 0


def _root_turns(steps: Sequence[Step], spans_by_id: Mapping[str, SpanRecord]) -> list[Step]:
    turn_spans = {s.span_id for s in steps if s.kind == "agent_turn"}
    roots: list[Step] = []
    parents: set[tuple[str, str]] = set()  # (trace, parent span) of the roots that have one
    for step in steps:
        if step.kind != "agent_turn":
            continue
        parent = step.parent_span_id
        nested = False
        seen = 0
        while parent is not None and seen < 256:  # bounded: cyclic parents must not hang us
            if parent in turn_spans:
                nested = True
                break
            parent_span = spans_by_id.get(parent)
            parent = parent_span.parent_span_id if parent_span else None
            seen += 1
        if nested:
            continue
        if roots and step.continuation:
            continue  # only tool results or approvals as input: the turn before goes on
        if (step.trace_id, step.parent_span_id) in parents:
            continue  # a sibling agent in the same request (handoff, agent as a tool)
        roots.append(step)
        if step.parent_span_id is not None:
            parents.add((step.trace_id, step.parent_span_id))
    return roots


def _turn_of(
    step: Step,
    root_ids: Mapping[str, int],
    root_starts: Sequence[int],
    spans_by_id: Mapping[str, SpanRecord],
) -> int:
    span_id: str | None = step.span_id
    seen = 0
    while span_id is not None and seen < 256:
        if span_id in root_ids:
            return root_ids[span_id]
        span = spans_by_id.get(span_id)
        span_id = span.parent_span_id if span else None
        seen += 1
    # Outside every turn span: the last turn that started before it (roots are in start order,
    # so a bisection finds it; a linear scan made sessions of many orphaned spans quadratic).
    return max(0, bisect_right(root_starts, step.start_unix_nano) - 1)


def _str_list(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                decoded = jsonfast.parse(text)
            except ValueError:  # not JSON, or nested too deep to read
                decoded = None
            if isinstance(decoded, list):
                return tuple(str(v).strip() for v in decoded if str(v).strip())
        return tuple(p.strip() for p in text.split(",") if p.strip())
    if isinstance(value, tuple):
        return tuple(str(v).strip() for v in value if str(v).strip())
    return ()


def _trace_ids(spans: Sequence[SpanRecord]) -> tuple[str, ...]:
    """The session's trace ids in the order their first span starts (one trace, the usual
    case, needs no sorting)."""
    if not spans:
        return ()
    if len(set(map(_TRACE_ID, spans))) == 1:
        return (spans[0].trace_id,)
    return tuple(dict.fromkeys(map(_TRACE_ID, sorted(spans, key=_START))))


def _service_name(spans: Sequence[SpanRecord]) -> str | None:
    """The resource's `service.name`, the agent's label when no span names the agent; not the
    SDK's `unknown_service...` placeholder."""
    for span in spans:
        name = _opt_str(span.resource.get(semconv.SERVICE_NAME))
        if name and not name.startswith("unknown_service"):
            return name
    return None


def _terminal_state(spans: Sequence[SpanRecord]) -> Mapping[str, Any] | None:
    key = semconv.SJ_TERMINAL_STATE
    state = None
    for span in spans:
        raw = span.attributes.get(key)
        if raw is not None:
            state = _state(raw, state)
        for ev in span.events:
            if ev.name == key or key in ev.attributes:
                state = _state(ev.attributes.get(key), state)
    return state


def _state(raw: Any, state: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """A recorded terminal state (a JSON object, as text or a mapping), else ``state``."""
    if isinstance(raw, str):
        try:
            decoded = jsonfast.parse(raw)
        except ValueError:  # not JSON, or nested too deep to read
            return state
        return decoded if isinstance(decoded, dict) else state
    return raw if isinstance(raw, dict) else state


def _derive_final_answers(steps: list[Step]) -> list[Step]:
    """Turns without an explicit final answer take their last model output, when it has a stop
    reason, asked for no tool and no agent span of the turn failed after it."""
    has_answer: set[int] = set()
    last: dict[int, Step] = {}
    failed: list[Step] = []
    for step in steps:  # one pass gathers all three
        kind = step.kind
        if kind == "model_call":
            if step.text or step.tool_requests:
                last[step.turn] = step
        elif kind == "final_answer":
            if step.text:
                has_answer.add(step.turn)
        elif kind == "agent_turn" and step.status == "error":
            failed.append(step)
    if not last:
        return steps
    extra = [
        replace(step, kind="final_answer", name="final_answer", seq=step.seq + 1)
        for turn, step in last.items()
        if turn not in has_answer
        and step.text
        and not step.tool_requests
        and is_stop_reason(step.finish_reason)
        and not any(t.turn == turn and t.end_unix_nano >= step.end_unix_nano for t in failed)
    ]
    return steps + extra


def is_stop_reason(reason: str | None) -> bool:
    """A finish reason that ends the turn (none recorded counts as one). A reason written as
    an enum member's str (`FinishReason.STOP`, Python's `str()` of an enum) is read as the
    member's name."""
    if not reason:
        return True
    kind, _, word = reason.rpartition(".")
    if kind and not kind.isidentifier():
        word = reason
    return word.lower() in STOP_REASONS


def assemble(
    meta: SessionMeta,
    spans: Sequence[SpanRecord],
    steps: Sequence[Step],
    *,
    effects: EffectMap = DEFAULT_EFFECT_MAP,
    skills: SkillLibrary = EMPTY_LIBRARY,
) -> Trajectory:
    """Order steps, number turns, pick final answers and compute statistics (``steps`` have
    been through `spanjudge.recognition.reconcile`; ``skills`` offers a catalogue when the
    trace recorded none)."""
    order = {(s.trace_id, s.span_id): i for i, s in enumerate(spans)}
    spans_by_id = {s.span_id: s for s in spans}
    kinds = set(map(_KIND, steps))

    def position(s: Step) -> tuple[int, int, int]:
        # A final answer is delivered when its span ends, after everything the turn did.
        at = s.end_unix_nano if s.kind == "final_answer" else s.start_unix_nano
        return (at, order.get((s.trace_id, s.span_id), 0), s.seq)

    ordered = sorted(steps, key=position)
    roots = _root_turns(ordered, spans_by_id) if "agent_turn" in kinds else []
    root_ids = {r.span_id: i for i, r in enumerate(roots)}
    root_starts = [r.start_unix_nano for r in roots]  # sorted: roots come in `position` order
    if len(roots) > 1:
        numbered = []
        for step in ordered:
            turn = _turn_of(step, root_ids, root_starts, spans_by_id)
            # replace() builds a new Step: only when the turn differs.
            numbered.append(step if step.turn == turn else replace(step, turn=turn))
    elif any(turn != 0 for turn in map(_TURN, ordered)):  # one turn or none: all in turn 0
        numbered = [step if step.turn == 0 else replace(step, turn=0) for step in ordered]
    else:
        numbered = ordered
    if "model_call" in kinds:  # (an answer is derived from a model call's output)
        derived = _derive_final_answers(numbered)
        if len(derived) != len(numbered):  # answers added: place them (the rest is in order)
            derived.sort(key=position)
        numbered = derived
    answers: dict[int, str] = {}
    loads: list[SkillLoad] = []
    catalogue: dict[str, CatalogueEntry] = {}
    schemas: dict[str, Any] = {}
    for step in numbered:  # one pass: answers, skill loads, catalogue and tool schemas
        kind = step.kind
        if kind == "final_answer":
            if step.text:
                answers[step.turn] = step.text.strip()
        elif kind == "skill_load" and step.activation_of is None:
            loads.extend(
                SkillLoad(
                    skill=skill,
                    status=step.skill_status or "unresolved",
                    span_id=step.span_id,
                    tool_name=step.name,
                    body=body,
                    body_source=step.skill_body_source,
                    error=step.error,
                    turn=step.turn,
                    tool_call_id=step.tool_call_id,
                )
                for skill, body in ((step.skill or "", step.skill_body), *step.also_loaded)
            )
        if step.catalogue:
            for entry in step.catalogue:
                known = catalogue.get(entry.name)
                if known is None or (not known.description and entry.description):
                    catalogue[entry.name] = entry
        if step.tool_schemas:
            schemas.update(step.tool_schemas)
    turns = tuple(
        [
            Turn(
                index=i,
                span_id=r.span_id,
                trace_id=r.trace_id,
                request=r.text,
                final_answer=answers.get(i),
                agent_name=r.agent_name,
                start_unix_nano=r.start_unix_nano,
                end_unix_nano=r.end_unix_nano,
            )
            for i, r in enumerate(roots)
        ]
    )
    skill_loads = tuple(loads)
    if catalogue:
        # a preset that reads one harness's own listing does not say where: a prompt's layout
        catalogue_source: CatalogueSource | None = (
            next(iter(catalogue.values())).source or TRACE_LAYOUT
        )
    else:  # the trace recorded no catalogue: the configured skills are the offer
        catalogue = {e.name: e for e in skills.catalogue()}
        catalogue_source = SKILLS_DIRECTORY if catalogue else None
    stats, retried, undone = compute_stats(numbered, spans, len(turns), effects)
    final_answer = None
    if turns:
        final_answer = turns[-1].final_answer
    elif answers:
        final_answer = answers[max(answers)]
    expected: list[str] = []
    task_id = run_seed = None
    # the first turn's agent, else the first span's that names one, else the service's
    agent_name = (turns[0].agent_name if turns else None) or None
    listed: Any = None
    resource: Any = None  # the last resource looked at: a request's spans share theirs
    in_resource = read_resource = False
    for span in spans:
        own = span.attributes
        if agent_name is None:
            agent_name = _opt_str(own.get(semconv.GEN_AI_AGENT_NAME))
        if span.resource is not resource:
            resource = span.resource
            in_resource = not resource.keys().isdisjoint(_SESSION_KEYS)
            read_resource = False
        if own.keys().isdisjoint(_SESSION_KEYS_OR_METADATA):
            # most spans: none of the keys below, or only their resource's, read once
            if not in_resource or read_resource:
                continue
            read_resource = True
        named, task, seed = _session_attrs(span)
        if named is not None and named != listed:  # every span repeats the same list
            listed = named
            for skill in _str_list(named):
                if skill not in expected:
                    expected.append(skill)
        if task_id is None and task is not None:  # the first one given stands
            task_id = _opt_str(task)
        if run_seed is None and seed is not None:
            run_seed = _opt_str(seed)
    if agent_name is None:
        agent_name = _service_name(spans)
    return Trajectory(
        session_id=meta.session_id,
        session_key_source=meta.key_source,
        complete=meta.complete,
        revision=meta.revision,
        close_reason=meta.close_reason,
        trace_ids=_trace_ids(spans),
        turns=turns,
        steps=tuple(numbered),
        skill_loads=skill_loads,
        catalogue=tuple(catalogue.values()),
        catalogue_source=catalogue_source,
        final_answer=final_answer,
        stats=stats,
        agent_name=agent_name,
        task_id=task_id,
        run_seed=run_seed,
        expected_skills_attr=tuple(expected),
        terminal_state=_terminal_state(spans),
        tool_schemas=schemas,
        span_count=len(spans),
        truncated_values=sum(map(_TRUNCATED, spans)),
        retry_span_ids=retried,
        backtrack_span_ids=undone,
        log_records=meta.log_records,
        log_records_unjoined=meta.log_records_unjoined,
    )


def _session_attrs(span: SpanRecord) -> tuple[Any, Any, Any]:
    """spanjudge's own session attributes (expected skills, task id, run seed; None when not
    given): on the span, its resource, or (OpenInference, where `using_attributes(metadata=...)`
    is the only way users can set them) inside `metadata` JSON."""
    own, resource = span.attributes, span.resource
    found: list[Any] = []
    for key in _SESSION_KEYS_IN_ORDER:  # `span.attr(key)`, inline: read for most spans
        value = own.get(key)
        found.append(resource.get(key) if value is None else value)
    metadata = own.get(semconv.OI_METADATA)
    if isinstance(metadata, str) and "spanjudge." in metadata:
        try:
            decoded = jsonfast.parse(metadata)
        except ValueError:  # not JSON, or nested too deep to read
            decoded = None
        if isinstance(decoded, dict):
            found = [
                _from_json(decoded.get(key)) if value is None else value
                for key, value in zip(_SESSION_KEYS_IN_ORDER, found, strict=True)
            ]
    named, task, seed = found
    return named, task, seed


def _from_json(value: Any) -> Any:
    """An attribute value as decoded JSON gives it: a list as the tuple a span would hold."""
    return tuple(value) if isinstance(value, list) else value


def _opt_str(value: Any) -> str | None:
    if value is None or value == "":
        return None
    return str(value)
