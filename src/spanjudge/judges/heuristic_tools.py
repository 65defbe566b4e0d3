"""The heuristic judge's tool-level questions: the right tool, and arguments that are right.

Evidence only, never a list of tool names:

- selection: a tool the agent was not offered (when the offer was recorded) is wrong; a tool a
  loaded SKILL.md tells it to use is right when that skill fits the request; otherwise the tool
  must be about the request: its name or description shares a word (or a related one) with the
  request, or its arguments carry a value the request or an earlier tool output gave;
- parameters: the arguments must satisfy the tool's recorded schema (required names, no unknown
  ones where the schema forbids them, types, enums); a call that failed with an argument error is
  wrong; and every short identifier-like value (a path, an id, a name) must come from the
  context: the requests, earlier tool arguments and outputs, or a loaded SKILL.md (a path may
  also sit under a directory the context names).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from spanjudge.judges.base import BINARY, Judgement, JudgeRequest
from spanjudge.judges.lexicon import related
from spanjudge.judges.text import parse_skill, tokens
from spanjudge.trajectory.steps import Step

NAME = "heuristic"
_ARG_ERROR = re.compile(
    r"invalid|missing|required|unknown (?:argument|parameter|field)|unexpected (?:argument|keyword)"
    r"|validation|no such file|not found|does not exist|permission denied|out of scope",
    re.IGNORECASE,
)
_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list, tuple),
    "object": (dict,),
}
_SHORT = 200
_DIRECTORY = re.compile(r"(?:^|[\s'\"(`])\.{0,2}/?[\w.-]+/")
_TIMESTAMP = re.compile(
    r"^\d{4}-\d{2}-\d{2}(?:[t ]\d{2}:\d{2}(?::\d{2})?(?:\.\d+)?(?:z|[+-]\d{2}:?\d{2})?)?$"
)


def _answer(rating: str, why: str, evidence: tuple[str, ...] = ()) -> Judgement:
    return Judgement(
        rating=rating, score=BINARY[rating], rationale=why, judge=NAME, evidence=evidence
    )


def _before(request: JudgeRequest) -> list[Step]:
    call = request.tool_call
    return [s for s in request.steps if call is None or s.span_id != call.span_id]


def _context_text(request: JudgeRequest) -> str:
    parts = [p for p in (request.request, *request.prior_context) if p]
    for step in _before(request):
        if step.kind in ("tool_call", "skill_load") and not step.failed:
            parts.append(json.dumps(step.arguments, default=str))
            parts.append(step.result or "")
        if step.skill_body:
            parts.append(step.skill_body)
    return "\n".join(parts)


def _values(arguments: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(arguments, Mapping):
        for key, value in arguments.items():
            if isinstance(value, (Mapping, list)):
                for sub, inner in _values(value):
                    yield f"{key}.{sub}", inner
            else:
                yield str(key), value
    elif isinstance(arguments, list):
        for i, value in enumerate(arguments):
            for sub, inner in _values(value):
                yield f"{i}.{sub}", inner


def _grounded(value: str, context: str, words: set[str]) -> bool:
    lowered = context.lower()
    needle = value.strip().lower()
    if needle in lowered or _TIMESTAMP.match(needle):
        # A time the agent worked out ("since 09:40" -> an ISO timestamp) is not an identifier.
        return True
    if "/" in needle:
        parent, name = needle.rsplit("/", 1)
        if parent and (parent + "/") in lowered:
            return True
        if _DIRECTORY.search(lowered):
            return False  # the context names where things are, and this is elsewhere
        # A file the agent creates may be new, but is named after what it was asked for.
        stem = tokens(name.rsplit(".", 1)[0])
        if stem and all(related(w) & words for w in stem):
            return True
    own = tokens(value)
    return bool(own) and own <= words


def judge_tool_parameters(request: JudgeRequest) -> Judgement:
    """Schema, argument errors, then grounding of each short identifier-like value."""
    call = request.tool_call
    assert call is not None  # check_evidence
    args = call.arguments
    schema = request.tool_schemas.get(call.name)
    if isinstance(schema, Mapping):
        problem = _schema_problem(args, schema)
        if problem:
            return _answer("no", f"{call.name}: {problem} (the tool's schema)", (call.span_id,))
    if call.failed and call.error and _ARG_ERROR.search(call.error):
        short = " ".join(call.error.split())[:120]
        return _answer("no", f"{call.name} failed on its arguments: {short!r}", (call.span_id,))
    context = _context_text(request)
    words = tokens(context)
    checked = []
    for key, value in _values(args if isinstance(args, (Mapping, list)) else {"": args}):
        if not isinstance(value, str) or not value.strip():
            continue
        if len(value) > _SHORT or any(c.isspace() for c in value.strip()):
            continue  # content the agent wrote (a report, a message): not an identifier
        if not _grounded(value, context, words):
            why = (
                f"{call.name}: argument {key or 'value'}={value!r} comes from nothing in the "
                "request, the earlier tool calls or the loaded skill"
            )
            return _answer("no", why, (call.span_id,))
        checked.append(f"{key}={value!r}" if key else repr(value))
    shown = f"; grounded: {', '.join(checked)}" if checked else ""
    return _answer("yes", f"{call.name}: arguments fit the schema and the context{shown}")


def _schema_problem(args: Any, schema: Mapping[str, Any]) -> str | None:
    props = schema.get("properties")
    if not isinstance(props, Mapping):
        return None
    given = args if isinstance(args, Mapping) else {}
    missing = [r for r in schema.get("required") or () if r not in given]
    if missing:
        return f"missing required argument {', '.join(map(str, missing))}"
    if schema.get("additionalProperties") is False:
        unknown = [k for k in given if k not in props]
        if unknown:
            return f"unknown argument {', '.join(map(str, unknown))}"
    for key, value in given.items():
        spec = props.get(key)
        if not isinstance(spec, Mapping):
            continue
        want = _TYPES.get(str(spec.get("type")))
        if want and (not isinstance(value, want) or (bool not in want and value is True)):
            return f"argument {key} should be {spec.get('type')}, got {type(value).__name__}"
        enum = spec.get("enum")
        if isinstance(enum, list) and value not in enum:
            return f"argument {key}={value!r} is not one of {enum}"
    return None


def judge_tool_selection(request: JudgeRequest, skill_fits: Any) -> Judgement:
    """``skill_fits(skill_load_step) -> bool | None``: whether a loaded skill suits the request."""
    call = request.tool_call
    assert call is not None  # check_evidence
    for earlier in _before(request):
        if (
            earlier.kind == "tool_call"
            and earlier.name == call.name
            and not earlier.failed
            and earlier.arguments == call.arguments
            and call.arguments
        ):
            why = f"{call.name} repeats a call that had already succeeded with the same arguments"
            return _answer("no", why, (earlier.span_id, call.span_id))
    if request.tool_schemas and call.name not in request.tool_schemas:
        offered = ", ".join(sorted(request.tool_schemas)[:8])
        return _answer("no", f"{call.name} was not among the tools offered ({offered})")
    for load in _before(request):
        if load.kind != "skill_load" or not load.skill_body or load.failed:
            continue
        named = {t for st in parse_skill(load.skill_body).steps for t in st.tools}
        if call.name in named or any(call.name.endswith(("_" + t, "." + t)) for t in named):
            fits = skill_fits(load)
            if fits is False:
                return _answer(
                    "no",
                    f"{call.name} serves skill {load.skill!r}, which does not fit the request",
                    (call.span_id, load.span_id),
                )
            return _answer(
                "yes", f"{call.name} is a step of loaded skill {load.skill!r}", (load.span_id,)
            )
    asked = tokens(request.request) | set().union(*(tokens(p) for p in request.prior_context))
    schema = request.tool_schemas.get(call.name)
    about = tokens(call.name)
    if isinstance(schema, Mapping):
        about |= tokens(str(schema.get("description") or ""))
    shared = sorted(w for w in about if related(w) & asked)
    if shared:
        return _answer("yes", f"{call.name} is about the request ({', '.join(shared)})")
    values = [
        v
        for _, v in _values(call.arguments if isinstance(call.arguments, Mapping) else {})
        if isinstance(v, str) and len(v) <= _SHORT
    ]
    mentioned = sorted({w for v in values for w in tokens(v) if related(w) & asked})
    if mentioned:
        why = f"{call.name} works on what the request names ({', '.join(mentioned)})"
        return _answer("yes", why)
    context = _context_text(request)
    words = tokens(context)
    carried = [
        f"{k}={v!r}"
        for k, v in _values(call.arguments if isinstance(call.arguments, Mapping) else {})
        if isinstance(v, str) and v.strip() and len(v) <= _SHORT and _grounded(v, context, words)
    ]
    if carried:
        return _answer("yes", f"{call.name} works on what the context gave ({', '.join(carried)})")
    return _answer(
        "no",
        f"{call.name} is not about the request and works on nothing the request or earlier "
        "tool calls gave",
        (call.span_id,),
    )
