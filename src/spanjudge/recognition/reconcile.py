"""Evidence rules that need the whole session, applied after every preset has spoken.

- one model call per request: a wrapper model span around the real call (Google ADK's
  `call_llm` around `generate_content`) is merged into the call it wraps, tokens counted once;
- one tool call per call: a tool span nested in a tool span of the same tool (an MCP client
  span and the server span it propagated to) is one call;
- a model call whose output recorded no tool call (an instrumentation that keeps only the
  output's text) asked for the calls the next input's history shows first: a call id no output
  asked for belongs to the latest model call of its trace before the first input holding it
  that recorded no request and no answer of its own;
- a tool span with a call id that recorded no arguments or no result takes them from the model
  output that asked for that call id and from the result the agent sent back with it, and is
  decided again (load, failure or ordinary call) on what it then holds;
- a call interrupted for approval (no result) and the same call run on resuming are one, and
  the resumed run continues the request before it;
- a tool call the model asked for that no tool span shows is decided by the result the agent
  sent back with its call id: an error, a refusal or nothing makes it a failed attempt (rejected
  before execution, aborted), so the corrected call after it counts as a retry; any other
  result is a call that ran untraced (in a session traced at the model client only, every
  call); there, a call the session's last model call asked for with no result sent back is a
  call without a result (the run ended), and a call whose result goes to a model call of
  another agent (another agent name or instructions) is a handoff, not a tool call;
- a prompt that lists two or more named entries, one of them a skill the session shows elsewhere
  (the skills directory, a SKILL.md front matter, a load) and no catalogue offers, offers that
  list: the entries' names, not a word like "skills", say what they are;
- a tool call whose arguments name a catalogue or library skill is a load of that skill, loaded
  or failed as its result says (an empty result is a failed load), unless the session shows the
  tool taking ordinary data under that argument;
- a SKILL.md body that reaches the model in a later message completes the load that asked
  for it (a loader nobody named), or is a pinned skill when no call asked for it;
- one activation is counted once: a lazy load followed by the read of its SKILL.md is one
  load with the body from the read;
- a load whose trace did not record the body takes it from the configured skills directory;
- an answer that runs the request's texts together is what the last model call said;
- a session with no turn step (model calls and tools only) begins a turn at its first model
  call and at each call whose input ends with a new user request.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from operator import attrgetter, itemgetter

from spanjudge.recognition.answers import not_concatenated
from spanjudge.recognition.base import (
    as_text,
    is_refusal,
    joined_text_blocks,
    parse_json,
    read_json,
)
from spanjudge.recognition.catalogue_layouts import by_layout
from spanjudge.recognition.documents import each_document
from spanjudge.recognition.evidence import (
    EMPTY_RESULT,
    as_skill_load,
    body_of,
    describes_loader,
    front_matter_name,
    named_argument,
    payload_error,
    reads_as_instructions,
    skill_md_read,
    skill_of_call,
    tool_step,
)
from spanjudge.remembered import remembered_within
from spanjudge.spans.record import SpanRecord
from spanjudge.trajectory.skills import EMPTY_LIBRARY, SkillLibrary
from spanjudge.trajectory.steps import (
    TRACE_LAYOUT,
    CatalogueEntry,
    Step,
    ToolRequest,
    ToolResult,
)
from spanjudge.trajectory.toolnames import candidates

_TOOL_KINDS = ("tool_call", "skill_load")
_KIND = attrgetter("kind")
_WHEN = itemgetter(0)
# Argument names that may carry a skill's name for a loader nobody listed.
_NAME_KEY = re.compile(r"skill|name|capabilit|^id$", re.I)
# A schema's description of the argument that names what a loader loads.
_LOADS = re.compile(r"\b(?:skill|capability)\b[^.]{0,40}\bto (?:load|activate)\b", re.I)
# A result the agent sent back that reports a failure: in its first words ("Error: ...", "An
# error occurred while running the tool."), or in its first line ("Skill store unavailable
# while loading 'x', try again.").
_FAILED_TEXT = re.compile(
    r"\s*(?:error|exception|traceback|failed|failure|invalid|validation error)\b"
    r"|\s*an? (?:\w+ )?(?:error|exception) (?:occurred|was raised|happened)\b"
    r"|[^\n]{0,200}\b(?:unavailable|could not|cannot|can't|unable to|timed out|denied"
    r"|no \w+(?: \w+)? found)\b",
    re.I,
)
# A result the agent sent back instead of running the call: it names the call's tool and says
# it was not run ("Tool call limit reached. Tool call x not executed.").
_NOT_RUN = re.compile(r"\bnot (?:been )?executed\b", re.I)
UNEXECUTED = "requested by the model but never executed (rejected before execution or aborted)"


def reconcile(
    steps: Sequence[Step],
    spans: Sequence[SpanRecord],
    library: SkillLibrary = EMPTY_LIBRARY,
) -> list[Step]:
    """The session's steps with every whole-session evidence rule applied."""
    spans_by_id = {s.span_id: s for s in spans}
    parents = {s.parent_span_id for s in spans}  # the spans some span sits under
    # No rule makes a model call: a session without one (tools under a turn) skips the rules
    # that read only model calls (their requests, results sent back, schemas, texts).
    calls = False
    # Whether some model call or tool call has a span under it (else none is nested in
    # another), whether a call waits (no result, not failed) and whether one kept only a bare
    # string as its arguments, asked once: merging calls only fills in what a call lacked
    # from a call of the same tool, so none of these appears after this.
    nested_calls = nested_tools = waiting = bare = unrecorded = False
    for step in steps:
        kind = step.kind
        if kind == "model_call":
            calls = True
            if step.span_id in parents:
                nested_calls = True
        elif kind == "tool_call" or kind == "skill_load":
            if step.span_id in parents:
                nested_tools = True
            if step.result is None and not step.failed:
                waiting = True
            if isinstance(step.arguments, str):
                bare = True
            if step.tool_call_id and (
                step.arguments is None or step.result is None or isinstance(step.arguments, str)
            ):
                unrecorded = True
    out = list(steps)
    if calls:
        out = _requests_from_history(out)
    if nested_calls:
        out = _merge_nested(out, spans_by_id, parents, "model_call")
    if nested_tools:
        out = _merge_nested(out, spans_by_id, parents, "tool")
    if unrecorded and calls:
        out = _filled_by_call_id(out, spans_by_id)
    if waiting:
        out = _resumed_calls(out)
    if bare:
        out = _requested_arguments(out)
    looked_for = _known_skills(out, library)
    looked_at = tuple(out)  # (held: no id of theirs is reused meanwhile)
    ids_looked_at = set(map(id, looked_at))
    out = _catalogue_by_names(out, spans_by_id, looked_for)
    names = {e.name for s in out for e in s.catalogue} | set(library.skills)
    ordinary = _ordinary_uses(out, names)
    if calls:
        out = _unexecuted_requests(out, names, ordinary)
    if names:  # (else no call names a skill: every step stays)
        out = [_load_by_evidence(s, names, library, ordinary) for s in out]
    if calls:
        out = _failed_loads_by_schema(out)
    out = _loads_by_definition(out)
    if calls:
        out = _bodies_from_messages(out)
    out = each_document(_one_activation(out))
    # Skills known only from the loads found since: a prompt naming one of the others was
    # found above, and rescanning for them would find nothing more. (A step looked at above
    # shows what it showed then: only the steps made since are read.)
    made = set(map(id, out)) - ids_looked_at
    if made:  # (most sessions: no step made since)
        since = [step for step in out if id(step) in made]
        out = _catalogue_by_names(out, spans_by_id, _known_skills(since, library) - looked_for)
    if calls:
        out = _turns_from_model_calls(not_concatenated(out), spans_by_id)
    if "skill_load" not in map(_KIND, out):
        return out
    return [_with_body_source(s, library) if s.kind == "skill_load" else s for s in out]


def _requests_from_history(steps: list[Step]) -> list[Step]:
    """Each call id the model calls' input histories show and no model output asked for, given
    to the call that asked it: the latest model call of the trace that ended before the first
    input holding the id and whose own output recorded no request and is no answer (no text,
    or a finish reason saying it stopped for tools)."""
    asked = {
        r.call_id for s in steps if s.kind == "model_call" for r in s.tool_requests if r.call_id
    }
    calls = sorted(
        (s for s in steps if s.kind == "model_call"),
        key=lambda s: (s.start_unix_nano, s.end_unix_nano),
    )
    added: dict[int, list[ToolRequest]] = {}
    for at, call in enumerate(calls):
        for request in call.history_requests:
            if not request.call_id or request.call_id in asked:
                continue
            asked.add(request.call_id)
            asker = next(
                (
                    before
                    for before in range(at - 1, -1, -1)
                    if _may_have_asked(calls[before], call)
                ),
                None,
            )
            if asker is not None:
                added.setdefault(asker, []).append(request)
    if not added:
        return steps
    given = {id(calls[at]): tuple(requests) for at, requests in added.items()}
    return [replace(s, tool_requests=given[id(s)]) if id(s) in given else s for s in steps]


def _may_have_asked(before: Step, call: Step) -> bool:
    """Whether model call ``before`` may be the one whose unrecorded output ``call``'s input
    history repeats: the same trace, ended before it, no request recorded and no answer."""
    return (
        before.trace_id == call.trace_id
        and before.end_unix_nano <= call.start_unix_nano
        and not before.tool_requests
        and (not before.text or (before.finish_reason or "").lower().startswith("tool"))
    )


def _turns_from_model_calls(steps: list[Step], spans_by_id: Mapping[str, SpanRecord]) -> list[Step]:
    """A session no span above its model calls divides into turns (traced at the model client
    only): the first model call, and each one whose input ends with a new user request, begins
    a turn; the calls after it, sent tool results, go on with it. With no input recorded, a call
    in another trace than the turn's, under a span of that trace (not a trace of its own), begins
    a turn too: a trace is one request, its root span ending the request over.

    A request is new when it differs from the turn's, or when it repeats it after the turn was
    answered (the user typed the same words again). It is no turn when it is the work of a
    call still waiting for its result: it equals what such a call was given (an agent run as
    a tool), or a later call goes on with the conversation of an earlier turn (the agent that
    delegated resumes: what came between was its sub-agent's work)."""
    if any(s.kind == "agent_turn" for s in steps):
        return steps
    calls = sorted(
        (s for s in steps if s.kind == "model_call"),
        key=lambda s: (s.start_unix_nano, s.end_unix_nano),
    )
    turns: list[Step] = []
    answered = False  # the last turn's model gave an answer asking for no tool
    waiting: dict[str, frozenset[str]] = {}  # call id -> what a call still waiting was given
    for call in calls:
        for result in call.tool_results:
            waiting.pop(result.call_id, None)
        request = call.request
        opens = (
            request is not None
            and (not turns or request != turns[-1].text or answered)
            and not any(_words(request) in given for given in waiting.values())
        )
        if request is None and turns and call.trace_id != turns[-1].trace_id:
            span = spans_by_id.get(call.span_id)
            opens = span is not None and span.parent_span_id in spans_by_id
        if not turns or opens:
            turns.append(
                Step(
                    kind="agent_turn",
                    name=call.name,
                    span_id=call.span_id,
                    trace_id=call.trace_id,
                    start_unix_nano=call.start_unix_nano,
                    end_unix_nano=call.end_unix_nano,
                    seq=call.seq - 1,
                    preset=call.preset,
                    text=request,
                    agent_name=call.agent_name,
                    catalogue=call.catalogue,
                )
            )
        elif request is None and call.works_on is not None and len(turns) > 1:
            _resumed_turn(turns, call.works_on)
        if call.end_unix_nano > turns[-1].end_unix_nano:
            turns[-1] = replace(turns[-1], end_unix_nano=call.end_unix_nano)
        answered = call.error is None and not call.tool_requests and bool(call.text)
        for asked in call.tool_requests:
            if asked.call_id:
                waiting[asked.call_id] = frozenset(
                    _words(text) for text in _strings_within(asked.arguments)
                )
    return steps + turns


def _words(text: str) -> str:
    """A text as compared with another: its words, whatever the white space between them."""
    return " ".join(text.split())


# How far back a conversation that resumes is looked for among the turns: delegation nests
# a few levels, not hundreds.
_RESUMED_WITHIN = 8


def _resumed_turn(turns: list[Step], works_on: str) -> None:
    """A call that goes on with the conversation of an earlier turn than the last (its input's
    last user request is that turn's): the turns opened since were its sub-agents' work and
    are merged back into it."""
    if turns[-1].text == works_on:
        return
    for at in range(len(turns) - 2, max(-1, len(turns) - 2 - _RESUMED_WITHIN), -1):
        if turns[at].text == works_on:
            end = max(t.end_unix_nano for t in turns[at:])
            turns[at:] = [replace(turns[at], end_unix_nano=end)]
            return


def _strings_within(value: object, depth: int = 0) -> list[str]:
    """Every string in a call's arguments (nested ones too, a bounded walk)."""
    if isinstance(value, str):
        return [value]
    if depth > _MAX_DEPTH:
        return []
    if isinstance(value, Mapping):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return [s for item in value for s in _strings_within(item, depth + 1)]
    return []


# A prompt's texts nested in a span attribute (a JSON list of messages and their parts): bounded.
_MAX_TEXTS = 200
_PROMPTED = ("model_call", "agent_turn", "final_answer")  # spans that may hold a prompt
_MAX_DEPTH = 6
_SCALARS = (int, float, type(None))  # values that hold no text (a bool is an int)


def _known_skills(steps: list[Step], library: SkillLibrary) -> set[str]:
    """The skills the session shows outside any catalogue: the skills directory's, loads',
    and the names of SKILL.md front matter in bodies and results."""
    known = set(library.skills)
    for step in steps:
        if step.kind == "skill_load" and step.skill:
            known.add(step.skill)
        for text in (step.skill_body, step.result):
            if text is not None and (name := front_matter_name(text)) is not None:
                known.add(name)
        for _, body in step.bodies_seen:
            if (name := front_matter_name(body)) is not None:
                known.add(name)
    return known


def _catalogue_by_names(
    steps: list[Step], spans_by_id: Mapping[str, SpanRecord], skills: set[str]
) -> list[Step]:
    """A list of named entries in a model call's or turn's prompt that names one of the
    ``skills`` (`_known_skills`) no catalogue offers yet is offered to that step too."""
    if not skills:  # (most second passes: no skill came to light since the first)
        return steps
    known = skills - {entry.name for step in steps for entry in step.catalogue}
    if not known:
        return steps
    out = []
    read = _Read(tools=_session_tools(steps))
    for step in steps:
        span = spans_by_id.get(step.span_id) if step.kind in _PROMPTED else None
        entries = _entries_naming(span, known, read) if span is not None else ()
        if entries:
            have = {entry.name for entry in step.catalogue}
            step = replace(
                step, catalogue=(*step.catalogue, *(e for e in entries if e.name not in have))
            )
        out.append(step)
    return out


@dataclass(slots=True)
class _Read:
    """What one pass of `_catalogue_by_names` already read (for the same ``known``): model
    calls repeat the conversation so far, and a turn and its answer share a span."""

    # span id -> its entries
    spans: dict[str, tuple[CatalogueEntry, ...]] = field(default_factory=dict)
    # attribute text -> the texts within it
    texts: dict[str, list[str]] = field(default_factory=dict)
    layouts: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # text -> entries
    tools: frozenset[str] = frozenset()  # the session's tools: a list naming them is no catalogue


def _session_tools(steps: list[Step]) -> frozenset[str]:
    """The tools the session calls, asks for or offers (its model calls' definitions)."""
    names = {s.name for s in steps if s.kind in ("tool_call", "skill_load")}
    for step in steps:
        names.update(request.name for request in step.tool_requests)
        names.update(step.tool_schemas)
    return frozenset(names)


def _entries_naming(span: SpanRecord, known: set[str], read: _Read) -> tuple[CatalogueEntry, ...]:
    """The entries of lists naming one of ``known`` in the span's texts."""
    entries = read.spans.get(span.span_id)
    if entries is None:
        entries = read.spans[span.span_id] = _entries_in(span, known, read)
    return entries


def _entries_in(span: SpanRecord, known: set[str], read: _Read) -> tuple[CatalogueEntry, ...]:
    texts: list[str] = []
    values = [*span.attributes.values(), *(v for e in span.events for v in e.attributes.values())]
    for value in values:
        if isinstance(value, str) and len(texts) < _MAX_TEXTS:
            # the texts a string holds, read once: the first of them up to the bound
            # (`_texts_in` fills a list in the same order, stopping at the bound)
            within = read.texts.get(value)
            if within is None:
                within = read.texts[value] = []
                _texts_in(value, within, 0)
            texts += within[: _MAX_TEXTS - len(texts)]
        else:
            _texts_in(value, texts, 0)
    found: dict[str, CatalogueEntry] = {}
    for text in texts:
        layout = read.layouts.get(text)
        if layout is None:
            layout = read.layouts[text] = by_layout(text, known, tools=read.tools)
        for name, description in layout:
            found.setdefault(
                name, CatalogueEntry(name=name, description=description, source=TRACE_LAYOUT)
            )
    return tuple(found.values())


def _texts_in(value: object, texts: list[str], depth: int) -> None:
    """Multi-line strings in ``value``, a JSON document's strings included."""
    if len(texts) >= _MAX_TEXTS or depth > _MAX_DEPTH:
        return
    if isinstance(value, str):
        parsed = read_json(value) if value[:1] in "[{" else value
        if not isinstance(parsed, str):
            _texts_in(parsed, texts, depth + 1)
        elif "\n" in value:
            texts.append(value)
    elif isinstance(value, (list, tuple)):  # (never a Mapping: asked first, no ABC check)
        for item in value:
            if not isinstance(item, _SCALARS):
                _texts_in(item, texts, depth + 1)
    elif isinstance(value, (dict, Mapping)):
        for item in value.values():
            if not isinstance(item, _SCALARS):
                _texts_in(item, texts, depth + 1)


def _merge_nested(
    steps: list[Step],
    spans_by_id: Mapping[str, SpanRecord],
    parents: set[str | None],
    kind: str,
) -> list[Step]:
    """Steps of ``kind`` nested in another of the same kind (and, for tools, the same tool).
    ``parents``: the parent span ids of the session's spans (a step no span sits under has
    no step nested in it)."""
    kinds = _TOOL_KINDS if kind == "tool" else (kind,)
    index = {s.span_id: i for i, s in enumerate(steps) if s.kind in kinds}
    if len(index) < 2 or parents.isdisjoint(index):
        return steps
    if kind == "tool":
        names = [s.name for s in steps if s.kind in kinds]
        if len(set(names)) == len(names):
            # no tool called twice: no call is inside a call of its own tool, the only
            # merge the name check below allows (relax that check, and this goes too)
            return steps
    above: dict[str, int | None] = {}  # span id -> the nearest step of `kinds` above it

    def nearest(span_id: str | None) -> int | None:
        chain: list[str] = []
        found: int | None = None
        while span_id is not None and len(chain) < 256:  # bounded: cyclic parents
            if span_id in above:
                found = above[span_id]
                break
            chain.append(span_id)
            span = spans_by_id.get(span_id)
            parent = span.parent_span_id if span is not None else None
            if parent is not None and parent in index:
                found = index[parent]
                break
            span_id = parent
        for seen in chain:  # siblings share their ancestors: each walked once
            above[seen] = found
        return found

    merged: dict[int, int] = {}  # dropped step -> the step that absorbs it
    for i, step in enumerate(steps):
        if step.kind not in kinds:
            continue
        outer = nearest(step.span_id)
        if outer is None or outer == i:
            continue
        if kind == "tool" and steps[outer].name != step.name:
            continue  # a different tool around it: a sub-agent's call, not the same call
        merged[i] = outer
    runs = _runs(steps, merged) if kind == "model_call" else set()
    if not merged:
        return steps
    out = list(steps)
    for run in runs:
        # the calls inside count; the run's token totals go to its last call when none has any
        calls = sorted(
            (i for i, o in merged.items() if o == run), key=lambda i: steps[i].end_unix_nano
        )
        if all(steps[i].input_tokens is None for i in calls):
            out[calls[-1]] = replace(
                out[calls[-1]],
                input_tokens=steps[run].input_tokens,
                output_tokens=steps[run].output_tokens,
            )
        # and what the run was offered (catalogue, tool schemas) stays in the session
        first = out[calls[0]]
        out[calls[0]] = replace(
            first,
            catalogue=first.catalogue or steps[run].catalogue,
            tool_schemas=first.tool_schemas or steps[run].tool_schemas,
        )
    merged = {inner: outer for inner, outer in merged.items() if outer not in runs}
    for dropped, keeper in merged.items():
        # the call as the agent saw it (the outer span: ADK's call_llm with the conversation,
        # the MCP client) keeps its identity; the real model call inside supplies the tokens;
        # each fills what the other lacks
        inner = steps[dropped]
        if kind == "model_call" and inner.input_tokens is not None:
            out[keeper] = replace(
                out[keeper], input_tokens=inner.input_tokens, output_tokens=inner.output_tokens
            )
        out[keeper] = _fill(out[keeper], inner)
    return [s for i, s in enumerate(out) if i not in merged and i not in runs]


def _runs(steps: list[Step], merged: dict[int, int]) -> set[int]:
    """Model spans around several model calls: the run that made them, not one call (a span
    around one call is that call: ADK's `call_llm` around `generate_content`)."""
    inside: dict[int, int] = {}
    for outer in merged.values():
        inside[outer] = inside.get(outer, 0) + 1
    return {outer for outer, count in inside.items() if count > 1}


def _resumed_calls(steps: list[Step]) -> list[Step]:
    """A call interrupted before it ran (waiting for approval: the span has no result) and the
    same call, same arguments, run when the agent resumed are one call; a trace that opens
    by finishing such a call continues the request before it, not a new one."""
    if not any(s.result is None and not s.failed for s in steps if s.kind in _TOOL_KINDS):
        return steps  # no call waits: none to resume
    pending: dict[tuple[str, str | None], int] = {}
    dropped: set[int] = set()
    resumed: set[str] = set()
    calls = [i for i, s in enumerate(steps) if s.kind in _TOOL_KINDS]
    for i in sorted(calls, key=lambda j: steps[j].start_unix_nano):
        step = steps[i]
        if step.result is None and not step.failed:
            pending[(step.name, as_text(step.arguments))] = i
            continue
        # a key only while a call waits (as_text of the arguments costs)
        earlier = pending.pop((step.name, as_text(step.arguments)), None) if pending else None
        if earlier is not None:
            dropped.add(earlier)
            if steps[earlier].trace_id != step.trace_id:
                resumed.add(step.trace_id)
    if not dropped:
        return steps
    return [
        replace(s, continuation=True) if s.kind == "agent_turn" and s.trace_id in resumed else s
        for i, s in enumerate(steps)
        if i not in dropped
    ]


def _fill(keep: Step, other: Step) -> Step:
    changes: dict[str, object] = {}
    for name in ("text", "finish_reason", "model", "input_tokens", "output_tokens", "result"):
        if getattr(keep, name) is None and getattr(other, name) is not None:
            changes[name] = getattr(other, name)
    for name in (
        "tool_requests",
        "tool_results",
        "catalogue",
        "bodies_seen",
        "tool_schemas",
        "tool_descriptions",
    ):
        if not getattr(keep, name) and getattr(other, name):
            changes[name] = getattr(other, name)
    if keep.arguments is None and other.arguments is not None:
        changes["arguments"] = other.arguments
    if keep.error is None and other.error is not None:
        changes["error"] = other.error
        if keep.kind == "skill_load":  # a joined span says it failed: no body was loaded
            changes.update(skill_status="failed", skill_body=None, skill_body_source=None)
    return replace(keep, **changes) if changes else keep  # type: ignore[arg-type]


def _filled_by_call_id(steps: list[Step], spans_by_id: Mapping[str, SpanRecord]) -> list[Step]:
    """A tool span that carries a call id but recorded no arguments or no result (AutoGen's
    `execute_tool`, its content logged with the model calls) takes the arguments the model
    asked for under that id and the result the agent sent back with it, and is decided again
    (`tool_step`) on them. Arguments recorded as a text no decoder reads (a serialized mapping
    cut short, an object's repr) give way to the structured arguments asked for under the id.
    A call id may recur in a session (each run counting from one): the request is the last
    one made before the call began, the result the first one sent after it ended, and none
    when an earlier call had the same id."""
    asked: dict[str, list[tuple[int, object]]] = {}  # call id -> (when asked, arguments)
    answered: dict[str, list[tuple[int, ToolResult]]] = {}  # call id -> (when sent, result)
    descriptions: dict[str, str] = {}
    for step in steps:
        if step.kind != "model_call":
            continue
        for request in step.tool_requests:
            if request.call_id and request.arguments is not None:
                asked.setdefault(request.call_id, []).append(
                    (step.end_unix_nano, request.arguments)
                )
        # a call's input repeats the history: the newest result with an id is the last one,
        # and a result the history repeats unchanged is the one already held
        newest = {r.call_id: r for r in step.tool_results if r.text is not None}
        for result in newest.values():
            held = answered.setdefault(result.call_id, [])
            if not held or held[-1][1].text != result.text:
                held.append((step.start_unix_nano, result))
        descriptions.update(step.tool_descriptions)
    if not asked and not answered:
        return steps
    # an id whose own span recorded a result (a call resumed after waiting for approval ran
    # under the id of the one that waited): that result is not the waiting one's
    ran = {s.tool_call_id for s in steps if s.kind in _TOOL_KINDS and s.result is not None}
    out = []
    for step in steps:
        span = spans_by_id.get(step.span_id)
        call_id = step.tool_call_id
        # arguments kept as text no decoder read (`parse_arguments`): what the model asked for
        undecoded = isinstance(step.arguments, str)
        if (
            step.kind not in _TOOL_KINDS
            or not call_id
            or span is None
            or (step.arguments is not None and step.result is not None and not undecoded)
        ):
            out.append(step)
            continue
        arguments = step.arguments
        before = [(t, a) for t, a in asked.get(call_id, ()) if t <= step.start_unix_nano]
        if before and (arguments is None or undecoded):
            requested = max(before, key=_WHEN)[1]
            if arguments is None or isinstance(requested, Mapping):
                arguments = requested
        answer = None
        # an id asked for again (a run numbering its calls from one): a later input's history
        # may hold the earlier call's result under that id, so the result is left unknown
        if step.result is None and len(before) < 2 and call_id not in ran:
            after = [(t, r) for t, r in answered.get(call_id, ()) if t >= step.end_unix_nano]
            answer = min(after, key=_WHEN)[1] if after else None
        if arguments is step.arguments and answer is None:
            out.append(step)
            continue
        text = _unwrapped(answer.text) if answer is not None and answer.text else step.result
        failure = step.error if step.failed else None
        if failure is None and answer is not None and answer.failed:
            failure = (text or "").strip().split("\n")[
                0
            ] or "the result sent back is marked as an error"
        filled = tool_step(
            span,
            step.preset,
            tool=step.name,
            arguments=arguments,
            result=parse_json(text) if text is not None else None,
            result_text=text,
            has_result=text is not None,
            failure=failure,
            # a skill its span names when nothing else did (no arguments were recorded)
            declared_skill=step.skill or None if step.arguments is None else None,
            call_id=call_id,
            agent_name=step.agent_name,
            tool_schemas=step.tool_schemas,
            description=step.tool_descriptions.get(step.name) or descriptions.get(step.name),
        )
        out.append(replace(filled, seq=step.seq, turn=step.turn))
    return out


def _requested_arguments(steps: list[Step]) -> list[Step]:
    """A tool span with no call id (a tool that raised) that kept only a bare string
    (LangChain's input of a one-argument tool) takes the arguments the model requested of a
    tool of its name, when that string is one of them. (With a call id, `_filled_by_call_id`
    decides.)"""
    if not any(s.kind in _TOOL_KINDS and isinstance(s.arguments, str) for s in steps):
        return steps
    requests = [r for s in steps for r in s.tool_requests if isinstance(r.arguments, Mapping)]
    out = []
    for s in steps:
        if s.kind in _TOOL_KINDS and isinstance(s.arguments, str):
            same = [r for r in requests if not s.tool_call_id and r.name == s.name]
            match = next((r for r in same if s.arguments in r.arguments.values()), None)
            if match is not None:
                requests.remove(match)
                s = replace(s, arguments=dict(match.arguments))
        out.append(s)
    return out


def _unexecuted_requests(
    steps: list[Step], names: set[str], ordinary: set[tuple[str, str]]
) -> list[Step]:
    """Tool calls the model asked for that never ran: matched to executions by call id, or,
    where the instrumentation records no ids on tool spans, by tool name and time (the first
    execution of that tool after the request)."""
    if not any(s.tool_requests for s in steps if s.kind == "model_call"):
        return steps  # no model call asked for a tool
    # a load read from a model call's own prompt (a skill pinned into it) executed nothing
    models = {s.span_id for s in steps if s.kind == "model_call"}
    calls = [s for s in steps if s.kind in _TOOL_KINDS and s.span_id not in models]
    executed = {s.tool_call_id for s in calls if s.tool_call_id}
    sent_back = {r.call_id: r for s in steps for r in s.tool_results}
    unmatched = _requests_without_execution(steps, calls, sent_back) if not executed else None
    aborted: set[tuple[str, int]] = set()
    if not calls:  # no tool traced: each call the agent answered shows in the messages
        unmatched = {
            (s.span_id, at)
            for s in steps
            if s.kind == "model_call"
            for at, r in enumerate(s.tool_requests)
            if r.call_id in sent_back
        }
        aborted = _requests_left_open(steps, sent_back)
        unmatched |= aborted
        executed = set()
    received: dict[str, Step] | None = None  # (read only for a request answered untraced)
    requested = {r.call_id for s in steps if s.kind == "model_call" for r in s.tool_requests}
    # executions whose recorded id matches no request (ADK writes "<not specified>" for some):
    # matched to requests by tool name instead
    anonymous: dict[str, int] = {}
    for s in calls:
        if executed and s.tool_call_id not in requested:
            anonymous[s.name] = anonymous.get(s.name, 0) + 1
    added: list[Step] = []
    for step in steps:
        if step.kind != "model_call":
            continue
        for at, request in enumerate(step.tool_requests):
            if unmatched is not None:
                if (step.span_id, at) not in unmatched or request.call_id in executed:
                    continue
                if request.call_id:
                    executed.add(request.call_id)  # one call, however many spans asked
            elif not request.call_id or request.call_id in executed:
                continue
            else:
                executed.add(request.call_id)
                if anonymous.get(request.name):
                    anonymous[request.name] -= 1
                    continue
            attempt = Step(
                kind="tool_call",
                name=request.name,
                span_id=step.span_id,
                trace_id=step.trace_id,
                parent_span_id=step.parent_span_id,
                start_unix_nano=step.end_unix_nano,
                end_unix_nano=step.end_unix_nano,
                status="error",
                seq=step.seq + 1,
                preset=step.preset,
                tool_call_id=request.call_id,
                arguments=request.arguments,
                error=UNEXECUTED,
                agent_name=step.agent_name,
            )
            answer = sent_back.get(request.call_id) if request.call_id else None
            if answer is not None:
                if received is None:
                    received = _received_by(steps)
                if _hands_off(step, received.get(answer.call_id)):
                    continue  # another agent took the conversation over: a handoff, no call
            body = None
            if answer is not None:  # what the agent sent back decides how the call went
                attempt = _answered(attempt, answer)
                body = _result_body(answer.text) if answer.text else None
            elif (step.span_id, at) in aborted:  # the run ended before any result came back
                attempt = replace(attempt, status="unset", error=None)
            skill = skill_of_call(request.name, request.arguments)
            if (
                skill is not None
                and skill not in names
                and answer is None
                and not isinstance(request.arguments, Mapping)
            ):
                # arguments the framework could not parse may still name the skill meant
                text = as_text(request.arguments) or ""
                skill = next((n for n in sorted(names, key=len, reverse=True) if n in text), skill)
            if skill is None and attempt.error is None:
                skill = front_matter_name(body)  # a SKILL.md came back: whatever it was asked
            if skill is None:
                # a loader nobody named, refused by argument validation before it ran
                skill, _ = _named_skill(request.name, request.arguments, names, ordinary)
            added.append(
                attempt if skill is None else as_skill_load(attempt, skill, body, has_result=True)
            )
    return steps + added if added else steps


def _requests_left_open(
    steps: list[Step], sent_back: Mapping[str, ToolResult]
) -> set[tuple[str, int]]:
    """(model span, request index) of the tool calls the session's last model call asked for
    with no result ever sent back: the run ended (aborted, a turn limit) after asking. Whether
    they ran the trace does not show; they are calls without a result, neither failed nor
    answered."""
    models = [s for s in steps if s.kind == "model_call"]
    if not models:
        return set()
    last = max(models, key=lambda s: (s.end_unix_nano, s.start_unix_nano))
    return {
        (last.span_id, at)
        for at, r in enumerate(last.tool_requests)
        if r.call_id and r.call_id not in sent_back
    }


def _received_by(steps: list[Step]) -> dict[str, Step]:
    """Call id -> the first model call given that call's result."""
    found: dict[str, Step] = {}
    for step in sorted(steps, key=lambda s: s.start_unix_nano):
        if step.kind == "model_call":
            for result in step.tool_results:
                found.setdefault(result.call_id, step)
    return found


def _hands_off(asker: Step, receiver: Step | None) -> bool:
    """The model call given a call's result is another agent's than the one that asked for
    it: the call handed the conversation over. Another agent name says so; where no names
    are recorded, only instructions that open differently together with another set of
    offered tools (both calls recording their tools): an agent's own state written into its
    instructions (a plan its tools rewrite) changes the instructions, not the tools. An agent
    run as a tool answers the agent that asked, so its result goes back to that agent."""
    if receiver is None:
        return False
    if asker.agent_name and receiver.agent_name:
        return asker.agent_name != receiver.agent_name
    mine, theirs = asker.instructions, receiver.instructions
    if not mine or not theirs or theirs.startswith(mine[:64]) or mine.startswith(theirs[:64]):
        return False
    tools, their_tools = _offered(asker), _offered(receiver)
    return bool(tools) and bool(their_tools) and tools != their_tools


def _offered(call: Step) -> frozenset[str]:
    """The names of the tools a model call was offered (its tool definitions)."""
    return frozenset(call.tool_schemas) | frozenset(call.tool_descriptions)


def _unwrapped(text: str) -> str:
    """A result sent back as a list of text blocks (`[{"type": "input_text", "text": ...}]`)
    as its text."""
    joined = joined_text_blocks(parse_json(text))
    return text if joined is None else joined


def _answered(attempt: Step, answer: ToolResult) -> Step:
    """A requested call no tool span shows, with the result the agent sent back to the model:
    failed when that says so, else a call that ran untraced, with that result. Structure
    decides first (the message marks the result failed, an error payload, nothing at all);
    the wording of the text (a refusal, an opening "Error") only where structure is silent."""
    text = answer.text
    result = _unwrapped(text) if text is not None else ""
    error = payload_error(parse_json(result), result)
    if error is None and answer.failed:
        error = (result.strip().splitlines() or ["the result sent back is marked as an error"])[0]
    if error is None and (
        _FAILED_TEXT.match(result) or is_refusal(result[:500]) or _not_run(result, attempt.name)
    ):
        error = result.strip().splitlines()[0]
    if error is None and not result.strip():
        error = EMPTY_RESULT
    if error is not None:
        return replace(attempt, result=result or None, error=error)
    return replace(attempt, result=result, error=None, status="unset")


def _not_run(text: str, tool: str) -> bool:
    """The text sent back for a call of ``tool`` says that call was not run: it names the tool
    (as recorded, or its base name) and says "not executed" (not a result about something
    else that was not executed, such as a migration)."""
    opening = text[:500]
    return _NOT_RUN.search(opening) is not None and any(n in opening for n in candidates(tool))


def _requests_without_execution(
    steps: list[Step], calls: list[Step], sent_back: Mapping[str, ToolResult]
) -> set[tuple[str, int]]:
    """(model span, request index) of each request no execution answers, when tool spans carry
    no call ids: each execution answers the open request for its tool whose result the agent
    sent back is the execution's, else the earliest open one made before it started. Only
    tools that ran at some other time count: a request for one that never did (a handoff, a
    tool the instrumentation names differently) is no evidence either way, unless the result
    sent back for it says the call was not run (a call limit refused it)."""
    models = sorted(
        (s for s in steps if s.kind == "model_call" and s.tool_requests),
        key=lambda s: s.end_unix_nano,
    )
    ran = {c.name for c in calls}
    refused: set[tuple[str, int]] = set()
    open_requests: dict[str, list[tuple[int, str, int, str | None]]] = {}
    for model in models:
        for at, request in enumerate(model.tool_requests):
            answer = sent_back.get(request.call_id or "")
            if request.name not in ran:
                if answer is not None and answer.text and _not_run(answer.text, request.name):
                    refused.add((model.span_id, at))
                continue
            open_requests.setdefault(request.name, []).append(
                (model.start_unix_nano, model.span_id, at, _same(answer.text if answer else None))
            )
    for call in sorted(calls, key=lambda s: s.start_unix_nano):
        waiting = open_requests.get(call.name, [])
        before = [i for i, entry in enumerate(waiting) if entry[0] <= call.start_unix_nano]
        mine = [
            i for i in before if waiting[i][3] is not None and waiting[i][3] == _same(call.result)
        ]
        if mine or before:
            del waiting[(mine or before)[0]]
    return refused | {(e[1], e[2]) for waiting in open_requests.values() for e in waiting}


@remembered_within()  # several rules in a row read the same results of a session
def _result_body(text: str) -> str | None:
    """The SKILL.md text a result written as ``text`` carries (`body_of` its payload)."""
    return body_of(parse_json(text), text)


def _same(text: str | None) -> str | None:
    """A result as compared between a tool span and the message that sent it back."""
    return " ".join(text.split()) if text else None


def _load_by_evidence(
    step: Step, names: set[str], library: SkillLibrary, ordinary: set[tuple[str, str]]
) -> Step:
    """A plain tool call whose arguments name a known skill (unless the session shows the
    tool taking such values as ordinary data), or that returns a known skill's SKILL.md: a
    load of that skill, loaded or failed as its result says."""
    if step.kind != "tool_call" or not (names or library.skills):
        return step
    skill, named_by_key = _named_skill(step.name, step.arguments, names, ordinary)
    if skill is None and not library.skills and not _named_as_data(step, names, ordinary):
        return step
    body = _result_body(step.result) if step.result else None
    named = front_matter_name(body)
    if (known := library.skill_in(body)) is not None and skill in (None, known.name):
        skill, named_by_key = known.name, True
    elif skill is None and named is not None and named in names:
        skill, named_by_key = named, True  # taken as data, but answered with that SKILL.md
    if skill is None:
        return step
    load = as_skill_load(step, skill, body, has_result=step.result is not None)
    if named_by_key or load.skill_status == "failed":
        return load
    # under any other argument a skill's exact name is a load when the call failed or was
    # refused (`topic="csv-report"` answered "Playbook 'csv-report' does not exist"), or
    # answered with instructions; an ordinary answer ("3 lines") mentions the name as data
    return load if named == skill or reads_as_instructions(body) else step


def _named_skill(
    tool: str, arguments: object, names: set[str], ordinary: set[tuple[str, str]]
) -> tuple[str | None, bool]:
    """(the skill a call's arguments name, whether the whole argument or one whose name says
    "name" holds it), or (None, False). A value under an argument the session shows the tool
    taking ordinary data in (``ordinary``) names no skill: it is data."""
    if not names:
        return None, False
    if isinstance(arguments, str):
        value = arguments.strip()
        return (value, True) if value in names and (tool, "") not in ordinary else (None, False)
    skill = None
    if isinstance(arguments, Mapping):
        for key, value in arguments.items():
            if isinstance(value, str) and value.strip() in names:
                if (tool, str(key)) in ordinary:
                    continue
                skill = value.strip()
                if _NAME_KEY.search(str(key)) is not None:
                    return skill, True
    return skill, False


def _named_as_data(step: Step, names: set[str], ordinary: set[tuple[str, str]]) -> bool:
    """The call names a skill under an argument the tool takes ordinary data in."""
    if isinstance(step.arguments, str):
        return step.arguments.strip() in names and (step.name, "") in ordinary
    return isinstance(step.arguments, Mapping) and any(
        isinstance(v, str) and v.strip() in names and (step.name, str(k)) in ordinary
        for k, v in step.arguments.items()
    )


def _ordinary_uses(steps: Sequence[Step], names: set[str]) -> set[tuple[str, str]]:
    """(tool, argument) pairs the session shows taking ordinary data: a call with a value there
    that names no skill, answered with a result that is neither empty nor a refusal nor a
    SKILL.md ("" stands for a whole-string argument). A loader given a name it does not know
    refuses it; an ordinary tool given ordinary data answers."""
    found: set[tuple[str, str]] = set()
    if not names:
        return found
    for step in steps:
        if step.kind != "tool_call" or step.failed or not step.result or step.result.isspace():
            continue  # (failed, or answered with blanks at most)
        uses = []  # what the call shows, if its result is ordinary
        if isinstance(step.arguments, str) and step.arguments.strip() not in names:
            uses.append((step.name, ""))
        elif isinstance(step.arguments, Mapping):
            for key, value in step.arguments.items():
                if isinstance(value, str) and value.strip() and value.strip() not in names:
                    uses.append((step.name, str(key)))
        if found.issuperset(uses):
            continue  # nothing new: the same tool's earlier calls showed it (or it shows none)
        text = step.result or ""
        body = _result_body(text)
        if is_refusal(text[:500]) or front_matter_name(body) or reads_as_instructions(body):
            continue
        found.update(uses)
    return found


def _failed_loads_by_schema(steps: list[Step]) -> list[Step]:
    """A failed call whose argument the tool's own schema (as the model was given it) describes
    as naming what to load ("The id of the capability to load.") tried to load that value, even
    when no catalogue has it (a misspelt name)."""
    failed = (s for s in steps if s.kind == "tool_call" and s.error)
    if not any(isinstance(s.arguments, Mapping) for s in failed):
        return steps  # no failed call with arguments: none to read as a load
    schemas: dict[str, object] = {}
    for step in steps:
        if step.kind == "model_call":
            schemas.update(step.tool_schemas)
    out = []
    for step in steps:
        if step.kind == "tool_call" and step.error and isinstance(step.arguments, Mapping):
            key = _loading_argument(schemas.get(step.name))
            value = step.arguments.get(key) if key else None
            if isinstance(value, str) and value.strip():
                step = as_skill_load(step, value.strip(), None, has_result=True)
        out.append(step)
    return out


def _loads_by_definition(steps: list[Step]) -> list[Step]:
    """A tool call whose tool the model's tool definitions describe as loading a skill ("Load
    a skill's instructions by name"), where its own span says nothing: the one name it was
    given is what it loads. Refused or failed, a failed load of that name; answered with a
    SKILL.md or instructions, loaded; answered with data, still a tool call."""
    descriptions: dict[str, str] = {}
    for step in steps:
        if step.tool_descriptions:
            descriptions.update(step.tool_descriptions)
    if not descriptions:
        return steps
    out = []
    for step in steps:
        name = named_argument(step.arguments) if step.kind == "tool_call" else None
        if name is not None and describes_loader(descriptions.get(step.name)):
            body = _result_body(step.result) if step.result else None
            load = as_skill_load(
                step, name, body, has_result=step.result is not None or step.error is not None
            )
            if (
                load.skill_status == "failed"
                or front_matter_name(body) is not None
                or reads_as_instructions(body)
            ):
                step = load
        out.append(step)
    return out


def _loading_argument(schema: object) -> str | None:
    """The one argument a tool schema describes as the skill or capability to load."""
    if isinstance(schema, str):
        schema = parse_json(schema)
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(properties, Mapping):
        return None
    found = [
        str(key)
        for key, spec in properties.items()
        if isinstance(spec, Mapping) and _LOADS.search(str(spec.get("description") or ""))
    ]
    return found[0] if len(found) == 1 else None


def _bodies_from_messages(steps: list[Step]) -> list[Step]:
    out = list(steps)
    for model in [s for s in steps if s.kind == "model_call" and s.bodies_seen]:
        for name, body in model.bodies_seen:
            # earlier in the session, any trace: a multi-turn history repeats old results
            before = [i for i, s in enumerate(out) if s.start_unix_nano <= model.start_unix_nano]
            loads = [i for i in before if out[i].kind == "skill_load" and out[i].skill == name]
            if any(out[i].skill_status == "loaded" and out[i].skill_body for i in loads):
                continue  # the body arrived as that load's result
            # a load that returned nothing waits too: the body it asked for came this way
            waiting = [
                i for i in loads if out[i].skill_status == "loaded" or out[i].error == EMPTY_RESULT
            ]
            asking = [
                i
                for i in before
                if out[i].kind == "tool_call"
                and out[i].trace_id == model.trace_id
                and name in _strings_of(out[i].arguments)
            ]
            if waiting:
                out[waiting[-1]] = replace(
                    out[waiting[-1]],
                    skill_status="loaded",
                    skill_body=body,
                    skill_body_source="trace",
                    error=None,
                )
            elif asking:
                load = as_skill_load(out[asking[-1]], name, body, has_result=True)
                out[asking[-1]] = load
            elif not loads:
                out.append(_pinned(model, name, body))
    return out


def _pinned(model: Step, name: str, body: str) -> Step:
    """A skill the harness put in the prompt: a load without a call (placed before the call)."""
    return Step(
        kind="skill_load",
        name="pinned_skill",
        span_id=model.span_id,
        trace_id=model.trace_id,
        parent_span_id=model.parent_span_id,
        start_unix_nano=model.start_unix_nano,
        end_unix_nano=model.start_unix_nano,
        status="ok",
        seq=model.seq - 1,
        preset=model.preset,
        skill=name,
        skill_status="loaded",
        skill_body=body,
        skill_body_source="trace",
    )


def _strings_of(value: object) -> list[str]:
    if isinstance(value, str):
        return [value.strip()]
    if isinstance(value, Mapping):
        return [v.strip() for v in value.values() if isinstance(v, str)]
    return []


def _one_activation(steps: list[Step]) -> list[Step]:
    """A skill read again in the same trace after it was loaded (the lazy loader's SKILL.md
    read, a second window of the same file) is one activation: the first load counts it; a
    lazy load without a body takes the read's outcome and body."""
    loads = [i for i, s in enumerate(steps) if s.kind == "skill_load" and s.skill]
    if len(loads) < 2:
        return steps
    first: dict[tuple[str, str], int] = {}
    out = list(steps)
    for i in sorted(loads, key=lambda j: (out[j].start_unix_nano, out[j].seq)):
        step = out[i]
        key = (step.trace_id, step.skill or "")
        keeper_at = first.get(key)
        if keeper_at is None or skill_md_read(step.arguments) is None:
            if step.skill_status == "loaded":
                first[key] = i  # a second activation through the loader itself is counted
            continue
        keeper = out[keeper_at]
        if not keeper.skill_body and skill_md_read(keeper.arguments) is None:
            keeper = replace(
                keeper,
                skill_status=step.skill_status,
                skill_body=step.skill_body,
                skill_body_source=step.skill_body_source,
                error=step.error,
            )
        elif step.skill_status != "loaded":
            continue  # a failed re-read of a skill already loaded is its own attempt
        out[keeper_at] = keeper
        out[i] = replace(step, activation_of=keeper.span_id)
    return out


def _with_body_source(step: Step, library: SkillLibrary) -> Step:
    if step.kind != "skill_load" or step.skill_status != "loaded":
        return step
    if step.skill_body:
        return step if step.skill_body_source else replace(step, skill_body_source="trace")
    known = library.get(step.skill)
    if known is None:
        return step
    return replace(step, skill_body=known.body, skill_body_source="directory")
