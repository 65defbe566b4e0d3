"""The fallback for spans no convention preset claims: read them from their shape.

An agent library's own tracing may use keys nobody listed (`<prefix>.toolCall.name`,
`<prefix>.prompt.messages`, ...). Its spans are still recognisable by what their attributes pair:
- a tool call: a tool or function name beside its arguments and/or its result, under any prefix
  (`x.toolCall.name` + `x.toolCall.args`, `x.tool.name` + `x.tool.arguments`, `tool_name` +
  `tool_result`), or a span whose name says tool or function call with such a name, arguments
  or result;
- a turn and its answer: a root span (or the topmost span read by shape, under a span of
  something else: a web server's request) with a prompt-shaped attribute
  (`<prefix>.prompt.messages`, `<prefix>.prompt`, `<prefix>.input.messages`) and a
  response-shaped one
  (`<prefix>.response.text`, `<prefix>.response`, `<prefix>.completion`, `<prefix>.output.text`);
- a model call: a span below the turn with a prompt and a response or the tool calls it asked
  for (under a `tool calls` key), with its `prompt`/`input` and `completion`/`output` token
  counts (a turn's own counts are its run's).
- a span that says its own role: a `<prefix>.type` (or `.kind`, `.subtype`) of tool, generation /
  llm / model, or agent, beside `<prefix>.input` and/or `<prefix>.output`; the role key may sit
  in a namespace inside the prefix (`<prefix>:metadata:subtype` beside `<prefix>:input`), and
  `:` separates namespaces as `.` does. A role key stating something else, with no word of
  those (`memory`), says the span is no model call; one saying model is a model call, its token
  counts, with no prompt or response read, its prompt the role messages any attribute holds. A
  key that types the span itself (`span.type`, `<x>.span.type`) with no input or output of its
  own prefix is beside the span's own unprefixed `input` / `output` (an `entity.type` says what
  the span belongs to, not what it is). A tool's name is `<prefix>.name`, a tool-name key beside
  it (`tool.name`: its `tool.parameters` beside, a schema, are then no arguments) or the span's
  name, its arguments the input (of a function's `{"args", "kwargs"}` envelope, the keyword
  arguments), its result the output; a model call's or a turn's prompt is the
  input, its response the output (an assistant message, with the tool calls it asked for). With
  no role said, a `<prefix>.input` holding messages (`{"messages": [...]}` or a list of role
  messages) is a model call's prompt and `<prefix>.output` its response. Token counts may sit
  in a JSON value (`<prefix>.usage_details`: `prompt_tokens`, `completion_tokens`) or in the
  output's own `usage` object.
A root span's bare `input` / `output` count as prompt and response when they hold a user request
and an assistant text. The rules name shapes, never a framework. The registry asks this preset
last, and only about spans every other preset left alone (GenAI declines operations the
conventions do not name); the report counts what it read (`coverage.fallback_spans`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

from spanjudge.recognition.answers import assistant_text, response_message
from spanjudge.recognition.base import (
    as_text,
    call_record,
    call_record_arguments,
    instructions_opening,
    marked_failed,
    parse_json,
    span_error,
    span_fields,
)
from spanjudge.recognition.catalogue import parse_catalogue
from spanjudge.recognition.evidence import tool_step
from spanjudge.remembered import remembered_when_short
from spanjudge.spans.record import SpanRecord
from spanjudge.trajectory.steps import Step, ToolRequest, ToolResult

PRESET = "shape"
# `<prefix><sep>name` where the prefix's last word says tool or function: `x.toolCall.name`,
# `x.tool.name`, `agent.function_call.name`, `tool_name`, `toolName`.
# Attribute keys are short; the tool-name pattern backtracks on long runs of letters, so a key
# longer than this is never matched against it.
_MAX_KEY_CHARS = 200
_TOOL_NAME = re.compile(r"^(?P<p>(?:.*[._])?[A-Za-z]*(?:tool|function)[A-Za-z_]*?)[._]?name$", re.I)
_ARGUMENT_WORDS = ("args", "arguments", "input", "parameters", "params")
_RESULT_WORDS = ("result", "output", "response", "return", "returned")
# A span name that says tool or function call: "tool_call", "toolCall get_weather",
# "function call read_csv", "execute tool x", "tool: x".
_TOOL_SPAN = re.compile(
    r"\b(?:tool|function)[ _.-]?(?:call|invocation|execution|use)\b|\bexecute[ _.-]?tool\b"
    r"|^(?:tool|function)\b[:. ]",
    re.I,
)
_CALL_ID_WORDS = ("id", "call_id", "callId", "toolCallId")
_PROMPT = re.compile(r"(?:^|[._])(?:prompt(?:[._](?:messages|text))?|input[._]messages)$", re.I)
# A root span's bare `input` / `output`: prompt- and response-shaped only when they hold a user
# request and an assistant text.
_BARE = ("input", "output")
_RESPONSE = re.compile(
    r"(?:^|[._])(?:response(?:[._](?:text|messages|content))?|completion|output[._](?:text|messages))$",
    re.I,
)
_INPUT_TOKENS = re.compile(r"(?:prompt|input)[._]?tokens$", re.I)
_OUTPUT_TOKENS = re.compile(r"(?:completion|output)[._]?tokens$", re.I)
# The tools a model output asked for: `<prefix>.response.toolCalls`, `<prefix>.tool_calls`.
_ASKED = re.compile(r"(?:^|[._])tool[._]?calls$", re.I)
# `<prefix>.type` / `.kind` / `.subtype`, or with a word before it (`<prefix>.spanType`,
# `<prefix>.span_kind`, whose input is then `<prefix>.spanInputs`, `<prefix>.span_input`): a span
# that says its own role, by the key's value; and `<prefix>.input` (`_under` finds
# `<prefix>.output` and `<prefix>.name` beside either). A namespace may be separated by `.` or
# `:` (`<prefix>:input`).
_ROLE_KEY = re.compile(
    r"^(?P<p>.+?)(?:[._:](?i:(?:sub)?(?:type|kind))|(?<=[a-z])(?:Sub)?(?:Type|Kind))$"
)
_INPUT_KEY = re.compile(r"^(?P<p>.+)[.:]input$", re.I)
_INPUT_WORDS = ("input", "inputs")
_OUTPUT_WORDS = ("output", "outputs")
_NAMESPACE = re.compile(r"[.:]")
_OUTPUT_KEY = re.compile(r"(?:^|[.:])output$", re.I)
# A role is its value's last word, the noun a compound names (`chat_model`, `CHAT_MODEL`).
_ROLES = {"tool": "tool", "generation": "model", "llm": "model", "model": "model", "agent": "agent"}
_ROLE_WORDS = re.compile(r"[^a-z]+")
# The OpenTelemetry span kinds: how a span communicates, not what it is
_OTEL_KINDS = frozenset({"internal", "server", "client", "producer", "consumer", "unspecified"})
_USER_ROLES = frozenset({"user", "human"})
_SYSTEM_ROLES = frozenset({"system", "developer"})


class ShapeRecogniser:
    """Tool calls, turns and answers read from the shape of spans no preset claimed."""

    name = PRESET

    def recognise(self, span: SpanRecord) -> list[Step] | None:
        role = _role(span)
        if role is not None and role[0] == "tool":
            _, name, arguments, result = role
            return [self._tool(span, name, _call_arguments(span.attributes, arguments), result)]
        tool = _tool_keys(span)
        if tool is not None:
            return [self._tool(span, *tool)]
        shaped = _shaped_keys(span)
        if span.parent_span_id is None and (turn := self._turn(span, shaped)):
            return turn
        if role is None and _says_another_role(span):
            return None  # a memory read's query and the messages it found are no model call
        return self._model_call(span, shaped) or self._said_model_call(span)

    def _said_model_call(self, span: SpanRecord) -> list[Step] | None:
        """A span whose role key says it is a model call (`span.type` = `llm`) is one, though
        it records no prompt or response we read, when it shows the call: its token counts,
        or an attribute of any name holding the role messages it was sent (`llm.messages`),
        its prompt."""
        if not _says_model(span):
            return None
        prompt = next(
            (v for v in span.attributes.values() if isinstance(v, str) and _holds_messages(v)),
            None,
        )
        input_tokens, output_tokens = _tokens(span, _INPUT_TOKENS), _tokens(span, _OUTPUT_TOKENS)
        if prompt is None and input_tokens is None and output_tokens is None:
            return None  # a role word alone (`error.type` = `unknown_model`) shows no call
        request, system = _request(prompt) if prompt is not None else (None, None)
        return [
            Step(
                kind="model_call",
                name=span.name,
                request=request if prompt is not None and _ends_with_user(prompt) else None,
                works_on=request,
                instructions=instructions_opening(system),
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                tool_results=_sent_back(prompt) if prompt is not None else (),
                catalogue=parse_catalogue(system),
                error=span_error(span),
                **span_fields(span, PRESET),
            )
        ]

    def finalise(self, steps: list[Step], spans: Sequence[SpanRecord]) -> list[Step]:
        """Turns and model calls by where a span read by shape sits among what was read.

        With nothing read above it, a span with calls read below it is the turn (a model call
        by its own attributes, under a span of something else: a web server's request span, a
        job's span). With nothing read above or below it, a span that counted tokens or asked
        for tools is a model call, even as a root (a session traced at the model client
        only): session assembly divides such calls into turns by their requests."""
        shaped = [s for s in steps if s.preset == PRESET and s.kind in ("agent_turn", "model_call")]
        if not shaped:
            return steps
        by_id = {s.span_id: s for s in spans}
        read = {s.span_id for s in steps if s.kind in ("agent_turn", "model_call")}
        below = _with_steps_below(steps, by_id)
        changed: dict[str, list[Step]] = {}
        for step in shaped:
            span = by_id.get(step.span_id)
            if span is None or step.span_id in changed or _read_above(span, by_id, read):
                continue
            if step.span_id in below:
                turn = self._turn(span) if step.kind == "model_call" else None
                if turn:
                    changed[step.span_id] = turn
            elif step.kind == "agent_turn":
                call = self._model_call(span)
                if call and (call[0].tool_requests or call[0].input_tokens is not None):
                    changed[step.span_id] = call
            elif step.input_tokens is None and not step.tool_requests:
                turn = self._turn(span)  # no count, no tools: a turn by its prompt and answer
                if turn:
                    changed[step.span_id] = turn
        if not changed:
            return steps
        out = [s for s in steps if s.span_id not in changed or s.preset != PRESET]
        return out + [s for found in changed.values() for s in found]

    def _model_call(self, span: SpanRecord, shaped: _Shaped | None = None) -> list[Step] | None:
        """A span below the turn with prompt- and response-shaped attributes: one model call,
        its text, the tools it asked for and its token counts. (``shaped``: the span's
        `_shaped_keys`, when already read.)"""
        prompt, response, asked_key = shaped or _shaped_keys(span)
        prompt = prompt or _given(span, _BARE[0])
        if prompt is None:
            return None
        response = response or _bare(span, _BARE[1])
        asked = _asked(span, asked_key, response)
        if response is None and not asked:
            return None
        request, system = _request(span.attributes[prompt])
        return [
            Step(
                kind="model_call",
                name=span.name,
                text=assistant_text(span.attributes[response]) if response else None,
                request=request if _ends_with_user(span.attributes[prompt]) else None,
                works_on=request,
                instructions=instructions_opening(system),
                input_tokens=_tokens(span, _INPUT_TOKENS),
                output_tokens=_tokens(span, _OUTPUT_TOKENS),
                tool_requests=asked,
                tool_results=_sent_back(span.attributes[prompt]),
                catalogue=parse_catalogue(system),
                error=span_error(span),
                **span_fields(span, PRESET),
            )
        ]

    def _tool(self, span: SpanRecord, name: str, arguments: Any, result: str | None) -> Step:
        """A tool call: its name, its decoded ``arguments`` and the key of its ``result``."""
        raw = span.attributes.get(result) if result else None
        payload = parse_json(raw) if raw is not None else None
        call_id = next(
            (
                str(value)
                for key, value in span.attributes.items()
                if value and key.rsplit(".", 1)[-1] in _CALL_ID_WORDS and _is_tool_key(key)
            ),
            None,
        )
        return tool_step(
            span,
            PRESET,
            tool=name,
            arguments=arguments,
            result=payload,
            result_text=as_text(payload) if raw is not None else None,
            has_result=raw is not None,
            failure=span_error(span),
            call_id=call_id,
        )

    def _turn(self, span: SpanRecord, shaped: _Shaped | None = None) -> list[Step] | None:
        prompt, response, _ = shaped or _shaped_keys(span)
        prompt = prompt or _bare(span, _BARE[0])
        response = response or _bare(span, _BARE[1])
        if prompt is None or response is None:
            return None
        request, system = _request(span.attributes[prompt])
        if prompt in _BARE and request is None:
            return None
        if request is None:
            request = _sole_text(span.attributes[prompt])
        base = span_fields(span, PRESET)
        steps = [
            Step(
                kind="agent_turn",
                name=span.name,
                text=request,
                # the run's own counts (of every model call in it, traced or not)
                input_tokens=_tokens(span, _INPUT_TOKENS),
                output_tokens=_tokens(span, _OUTPUT_TOKENS),
                catalogue=parse_catalogue(system),
                error=span_error(span),
                **base,
            )
        ]
        answer = assistant_text(span.attributes[response])
        if answer:
            steps.append(Step(kind="final_answer", name=span.name, text=answer, seq=1, **base))
        return steps


def _with_steps_below(steps: list[Step], by_id: dict[str, SpanRecord]) -> set[str]:
    """The spans with a step read below them (bounded walks: cycles)."""
    found: set[str] = set()
    for step in steps:
        parent = step.parent_span_id
        for _ in range(256):
            if parent is None or parent in found:
                break
            found.add(parent)
            above = by_id.get(parent)
            parent = above.parent_span_id if above is not None else None
    return found


def _read_above(span: SpanRecord, by_id: dict[str, SpanRecord], read: set[str]) -> bool:
    """A span above ``span`` was read as a turn or a model call (a bounded walk: cycles)."""
    parent = span.parent_span_id
    for _ in range(256):
        if parent is None:
            return False
        if parent in read:
            return True
        above = by_id.get(parent)
        parent = above.parent_span_id if above is not None else None
    return False


def _call_arguments(attributes: Any, key: str | None) -> Any:
    """The decoded arguments under ``key`` (of a recorded Python call, its arguments)."""
    return call_record_arguments(parse_json(attributes[key])) if key is not None else None


def _role(span: SpanRecord) -> tuple[str, str, str | None, str | None] | None:
    """(role, name, input key, output key) of a span that says its own role (`_ROLE_KEY` with
    a value in `_ROLES`) beside its input and/or output, or whose `<prefix>.input` holds a
    model call's messages; its name is `<prefix>.name` when given, else the span's."""
    attributes = span.attributes
    for key, (inputs, output, name_key) in _layout(attributes)[2]:
        value = attributes[key]
        # with no role said (the key is the input), a model call by its prompt's messages
        role = _role_of(value) if key != inputs else "model" if _holds_messages(value) else None
        if role is None:
            continue
        named = _said(attributes.get(name_key)) if name_key is not None else None
        if named is None and role == "tool":  # a tool's name beside its role: `tool.name`
            named = _said(
                next((attributes[k] for k, _ in _layout(attributes)[0] if _given(span, k)), None)
            )
        name = named.strip() if isinstance(named, str) and named.strip() else span.name
        return role, name, _given(span, inputs) if inputs else None, output
    return None


def _says_model(span: SpanRecord) -> bool:
    """A `<prefix>.type` / `.kind` key of the span says model call (`_role_of`)."""
    attributes = span.attributes
    return any(_role_of(attributes[key]) == "model" for key in _layout(attributes)[3])


def _says_another_role(span: SpanRecord) -> bool:
    """The span's role keys (`_role`) state what it is, and none says tool, model or agent in
    any word (`memory`, `retriever`; `model_step` is a model's): it is none of those. An
    OpenTelemetry span kind copied into an attribute (`span.kind` = `internal`) says how the
    span communicates, not what it is."""
    attributes = span.attributes
    stated = False
    for key, (inputs, _, _) in _layout(attributes)[2]:
        said = _said(attributes[key]) if key != inputs else None
        words = [w for w in _ROLE_WORDS.split(said.lower()) if w] if isinstance(said, str) else []
        if any(w in _ROLES for w in words):
            return False
        stated = stated or (bool(words) and not _OTEL_KINDS.issuperset(words))
    return stated


def _role_of(value: Any) -> str | None:
    """The role a `<prefix>.type` value says (`_ROLES`), by its last word."""
    said = _said(value)
    if not isinstance(said, str):
        return None
    words = [w for w in _ROLE_WORDS.split(said.lower()) if w]
    return _ROLES.get(words[-1]) if words else None


def _said(value: Any) -> Any:
    """A text attribute as its text: one written as a JSON string literal (`"\\"TOOL\\""`, as
    tracers that JSON-encode every value write it) decoded, any other value as it is."""
    if isinstance(value, str) and value.lstrip()[:1] == '"':
        decoded = parse_json(value)
        if isinstance(decoded, str):
            return decoded
    return value


def _holds_messages(value: Any) -> bool:
    """``value`` is a list of role messages, or an object holding one under `messages`."""
    decoded = parse_json(value) if isinstance(value, str) else None
    if isinstance(decoded, dict):
        decoded = decoded.get("messages")
    return (
        isinstance(decoded, list)
        and bool(decoded)
        and all(isinstance(m, dict) and "role" in m for m in decoded)
    )


def _tool_keys(span: SpanRecord) -> tuple[str, Any, str | None] | None:
    """(tool name, arguments, result key) when the span is a tool call by its shape."""
    attributes = span.attributes
    for key, prefix_keys in _layout(attributes)[0]:
        value = attributes[key]
        if not isinstance(value, str) or not value.strip():
            continue
        arguments, result = prefix_keys
        if arguments is not None or result is not None or _named_call(span.name):
            return value.strip(), _call_arguments(attributes, arguments), result
    return None


# What a span's keys alone say, per distinct key layout (spans of one kind repeat theirs): the
# keys that may name a tool, each with its arguments and result keys; the keys with a
# shape (`_SHAPES`), each with its shapes; and the keys that may say the span's role, each
# with its input, output and name keys. Their values are read per span.
_Layout = tuple[
    tuple[tuple[str, tuple[str | None, str | None]], ...],
    tuple[tuple[str, tuple[bool, ...]], ...],
    tuple[tuple[str, tuple[str | None, str | None, str | None]], ...],
    tuple[str, ...],  # every key shaped as a role key, whatever is beside it
]
_LAYOUTS_MAX = 1024  # layouts kept: dropped all at once when full
_LAYOUT_CHARS = 2048  # a layout whose keys come to more characters is read, not kept
_layouts: dict[tuple[str, ...], _Layout] = {}


def _layout(attributes: Any) -> _Layout:
    """The span's key layout, read once per distinct layout."""
    keys = tuple(attributes)
    found = _layouts.get(keys)
    if found is None:
        found = _read_layout(keys)
        if sum(map(len, keys)) <= _LAYOUT_CHARS:
            if len(_layouts) >= _LAYOUTS_MAX:
                _layouts.clear()
            _layouts[keys] = found
    return found


def _read_layout(keys: tuple[str, ...]) -> _Layout:
    """`_Layout` of ``keys``, in their order (a key that needs no pattern is not matched)."""
    present = frozenset(keys)
    named = []
    shaped = []
    roles = []
    said = set()  # the prefixes whose role a `.type` or `.kind` key says
    role_keys = []
    for key in keys:
        prefix = _tool_prefix(key) if key[-4:].lower() == "name" else None
        if prefix is not None:
            arguments = _under(present, prefix, _ARGUMENT_WORDS)
            named.append((key, (arguments, _under(present, prefix, _RESULT_WORDS))))
        if not key.startswith("gen_ai."):
            shapes = _shapes_of(key)
            if True in shapes:
                shaped.append((key, shapes))
        role = _ROLE_KEY.match(key) if key[-4:].lower() in ("type", "kind") else None
        if role is not None:
            role_keys.append(key)
        for prefix in _enclosing(role.group("p")) if role is not None else ():
            inputs = _under(present, prefix, _INPUT_WORDS)
            output = _under(present, prefix, _OUTPUT_WORDS)
            if inputs is None and output is None and _types_the_span(prefix):
                # `span.type` says what the span is (`entity.type`, what it belongs to): its
                # input and output are the span's own, unprefixed
                inputs = _BARE[0] if _BARE[0] in present else None
                output = _BARE[1] if _BARE[1] in present else None
            if inputs is not None or output is not None:
                said.add(prefix)
                roles.append((key, (inputs, output, _under(present, prefix, ("name",)))))
                break
    for key in keys:  # with no role said, an input that holds messages says it (`_role`)
        given = _INPUT_KEY.match(key) if key[-5:].lower() == "input" else None
        if given is not None and given.group("p") not in said and not key.startswith("gen_ai."):
            prefix = given.group("p")
            names = _under(present, prefix, ("name",))
            roles.append((key, (key, _under(present, prefix, ("output",)), names)))
    return tuple(named), tuple(shaped), tuple(roles), tuple(role_keys)


def _types_the_span(prefix: str) -> bool:
    """``prefix`` of a `.type` / `.kind` key names the span itself: `span`, `x.span`."""
    lowered = prefix.lower()
    return lowered == "span" or lowered.endswith((".span", "_span"))


def _enclosing(prefix: str) -> Iterator[str]:
    """``prefix``, then each namespace enclosing it, nearest first: a role may be said deeper
    than the input and output it is about (`<prefix>:metadata:subtype` beside `<prefix>:input`)."""
    yield prefix
    cuts = [m.start() for m in _NAMESPACE.finditer(prefix)]
    for cut in reversed(cuts):
        if cut:
            yield prefix[:cut]


@remembered_when_short(maxsize=1024)  # spans of one kind carry the same keys: matched once
def _tool_prefix(key: str) -> str | None:
    """The `<prefix>` of a `<prefix>.name` key whose prefix says tool or function, else None.
    (A key longer than `_MAX_KEY_CHARS` names no tool: the pattern is not run on it.)"""
    if len(key) > _MAX_KEY_CHARS:
        return None
    match = _TOOL_NAME.match(key)
    return match.group("p") if match is not None else None


@remembered_when_short(maxsize=4096)  # spans of one kind carry the same names
def _named_call(name: str) -> bool:
    """The span's name says tool or function call (`_TOOL_SPAN`)."""
    return _TOOL_SPAN.search(name) is not None


def _under(attributes: Any, prefix: str, words: tuple[str, ...]) -> str | None:
    """The key `<prefix>.<word>` (or `<prefix>:<word>`, `<prefix>_<word>`, `<prefix><Word>`)
    present, if any."""
    for word in words:
        for key in (
            f"{prefix}.{word}",
            f"{prefix}:{word}",
            f"{prefix}_{word}",
            f"{prefix}{word.capitalize()}",
        ):
            if key in attributes:
                return key
    return None


def _is_tool_key(key: str) -> bool:
    """``key`` sits under a tool's namespace: beside its name (`x.tool.id`), or under the
    call of it (`tool.call.id`, as GenAI's `gen_ai.tool.call.id`)."""
    prefix = key.rsplit(".", 1)[0]
    if prefix.lower().endswith(".call"):
        prefix = prefix[: -len(".call")]
    return _tool_prefix(prefix + ".name") is not None


def _given(span: SpanRecord, key: str) -> str | None:
    value = span.attributes.get(key)
    return key if isinstance(value, str) and value.strip() else None


def _bare(span: SpanRecord, key: str) -> str | None:
    """``key`` when the span has it and it holds a request (input) or an answer (output)."""
    value = span.attributes.get(key)
    if not isinstance(value, str) or not value.strip():
        return None
    found = _request(value)[0] if key == _BARE[0] else assistant_text(value)
    return key if found else None


_SHAPES = (_PROMPT, _RESPONSE, _ASKED)
_Shaped = tuple[str | None, str | None, str | None]


def _shaped_keys(span: SpanRecord) -> _Shaped:
    """The first key with text of each shape (prompt, response, the tools asked for), from
    one look at the span's keys, or a model call's or a turn's own input and output (`_role`).
    The GenAI conventions' own message keys are not shapes: the
    GenAI preset reads them, and a span it left alone that carries them (an event-loop cycle
    repeating the conversation) is no call."""
    found: list[str | None] = [None, None, None]
    attributes = span.attributes
    for key, shapes in _layout(attributes)[1]:
        value = attributes[key]
        if isinstance(value, str) and value.strip():
            for at, shaped in enumerate(shapes):
                if shaped and found[at] is None:
                    found[at] = key
    role = _role(span)
    if role is not None and role[0] != "tool":  # a model call's or a turn's input and output
        _, _, inputs, output = role
        found[0] = found[0] or inputs
        found[1] = found[1] or (_given(span, output) if output is not None else None)
    return found[0], found[1], found[2]


@remembered_when_short(maxsize=4096)  # spans of one kind carry the same keys
def _shapes_of(key: str) -> tuple[bool, ...]:
    """Whether ``key`` has each of `_SHAPES`."""
    return tuple(pattern.search(key) is not None for pattern in _SHAPES)


def _request(prompt: Any) -> tuple[str | None, str | None]:
    """(the last user text, the system text) of a prompt: plain text, a message list, an
    object holding them (`{"system": ..., "prompt": ...}`, `{"messages": [...]}`), or a
    function's `{"args", "kwargs"}` envelope (its last text argument)."""
    decoded = parse_json(prompt)
    call = call_record(decoded)
    if call is not None:  # a function's call: its last text argument
        texts = [a for a in (*call[0], *call[1].values()) if isinstance(a, str)]
        decoded = next((t for t in reversed(texts) if t.strip()), "")
    if isinstance(decoded, str):
        return decoded.strip() or None, None
    request = None
    system = []
    if isinstance(decoded, dict) and "role" not in decoded:
        if isinstance(decoded.get("system"), str):
            system.append(decoded["system"])
        for key in ("prompt", "input", "query"):
            if isinstance(decoded.get(key), str) and decoded[key].strip():
                request = decoded[key].strip()
        decoded = decoded.get("messages")
    if isinstance(decoded, dict):
        decoded = [decoded]
    if not isinstance(decoded, list):
        return request, "\n".join(system) or None
    for message in decoded:
        if not isinstance(message, dict):
            continue
        role = str(message.get("role") or "").lower()
        text = assistant_text({**message, "role": None})
        if role in _USER_ROLES and text:
            request = text
        elif role in _SYSTEM_ROLES and text:
            system.append(text)
    return request, "\n".join(system) or None


_ID_KEYS = ("tool_call_id", "toolCallId", "tool_use_id", "toolUseId", "id")
_RESULT_KEYS = ("output", "result", "response", "content")


def _sent_back(prompt: Any) -> tuple[ToolResult, ...]:
    """The tool results a prompt's messages send back to the model, by call id: a `tool`
    message with its call's id, or a part whose type says result or response (`tool-result`,
    `tool_result`, `tool_call_response`) with one. A result its message or part marks failed
    says so."""
    decoded = parse_json(prompt)
    if isinstance(decoded, dict):
        decoded = decoded.get("messages")
    if not isinstance(decoded, list):
        return ()
    found: dict[str, ToolResult] = {}
    for message in decoded:
        if not isinstance(message, dict):
            continue
        content = message.get("content", message.get("parts"))
        held = [p for p in content if isinstance(p, dict)] if isinstance(content, list) else []
        results = [
            p for p in held if any(w in str(p.get("type") or "") for w in ("result", "response"))
        ]
        if not results and str(message.get("role") or "").lower() == "tool":
            results = [message]
        for part in results:
            call_id = next((part[k] for k in _ID_KEYS if isinstance(part.get(k), str)), None)
            if not call_id or call_id in found:
                continue
            value = next((part[k] for k in _RESULT_KEYS if k in part), None)
            if isinstance(value, dict) and "value" in value:  # `{"type": "text", "value": ...}`
                value = value["value"]
            failed = marked_failed(part) or (part is not message and marked_failed(message))
            found[call_id] = ToolResult(call_id=call_id, text=as_text(value), failed=failed)
    return tuple(found.values())


def _sole_text(given: Any) -> str | None:
    """The request a turn's input names when it is the function's arguments by name
    (`{"question": "...", "limit": 5}`) with one text of words among them: what the agent was
    asked."""
    decoded = parse_json(given)
    if not isinstance(decoded, dict):
        return None
    texts = [v.strip() for v in decoded.values() if isinstance(v, str) and v.strip()]
    # words, not an id (`{"user_id": "u-42", "question": "..."}`): a request is written in words
    said = [t for t in texts if len(t.split(None, 1)) > 1]
    return said[0] if len(said) == 1 else None


def _ends_with_user(prompt: Any) -> bool:
    """The prompt is plain text, or its message list ends with a user message (not a tool
    result sent back)."""
    decoded = parse_json(prompt)
    if isinstance(decoded, dict) and "role" not in decoded:
        decoded = decoded.get("messages", decoded.get("prompt"))
    if isinstance(decoded, str):
        return bool(decoded.strip())
    if isinstance(decoded, dict):
        decoded = [decoded]
    if not isinstance(decoded, list) or not decoded or not isinstance(decoded[-1], dict):
        return False
    last = decoded[-1]
    return str(last.get("role") or "").lower() in _USER_ROLES and not any(
        "tool" in str(k).lower() or "tool" in str(last.get("type") or "").lower() for k in last
    )


def _tokens(span: SpanRecord, pattern: re.Pattern[str]) -> int | None:
    """A token count: an integer attribute whose key ``pattern`` matches, else one inside a
    JSON object of counts (`<prefix>.usage_details`: `{"prompt_tokens": 320, ...}`)."""
    for key, value in span.attributes.items():
        if pattern.search(key) and isinstance(value, int) and not isinstance(value, bool):
            return value
    for key, value in span.attributes.items():
        if not isinstance(value, str):
            continue
        counts = parse_json(value) if "usage" in key.rsplit(".", 1)[-1].lower() else None
        if (
            counts is None
            and _OUTPUT_KEY.search(key)
            and value.lstrip().startswith("{")
            and '"usage"' in value
        ):
            decoded = parse_json(value)  # an output that carries its own `usage` counts
            counts = decoded.get("usage") if isinstance(decoded, dict) else None
        if isinstance(counts, dict):
            for name, count in counts.items():
                if pattern.search(name) and type(count) is int:  # (a bool is no count)
                    return int(count)
    return None


def _asked(
    span: SpanRecord, key: str | None, response: str | None = None
) -> tuple[ToolRequest, ...]:
    """The tool calls a model output lists (each with a name, and an id and arguments when
    recorded), under the `tool calls` key ``key`` (`_shaped_keys`), or inside the response
    or a bare output (`{"text": "", "toolCalls": [...]}`, an assistant message with
    `tool_calls`). A call's `function` object (`{"name", "arguments"}`) is read as the call."""
    calls = parse_json(span.attributes[key]) if key is not None else None
    for inside in (response, _BARE[1]):
        if calls is not None or inside is None:
            continue
        output = parse_json(span.attributes.get(inside))
        if isinstance(output, dict):
            output = response_message(output) or output  # a client's whole response object
            calls = next((v for k, v in output.items() if _ASKED.search(k)), None)
    if not isinstance(calls, list):
        return ()
    out = []
    for call in calls:
        if not isinstance(call, dict):
            continue
        if isinstance(call.get("function"), dict):
            call = {**call, **call["function"]}
        name = next(
            (v for k, v in call.items() if "name" in k.lower() and isinstance(v, str)), None
        )
        if not name:
            continue
        call_id = next((v for k, v in call.items() if k.lower().endswith("id") and v), None)
        arguments = next(
            (call[k] for k in ("args", "arguments", "input", "parameters") if k in call), None
        )
        out.append(
            ToolRequest(
                name=name,
                call_id=str(call_id) if call_id else None,
                arguments=parse_json(arguments) if isinstance(arguments, str) else arguments,
            )
        )
    return tuple(out)
