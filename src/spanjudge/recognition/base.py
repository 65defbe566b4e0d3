"""The recogniser protocol and the helpers every preset shares."""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol, runtime_checkable

from spanjudge import semconv
from spanjudge.remembered import remembered_within
from spanjudge.spans import jsonfast
from spanjudge.spans.record import AttrValue, SpanRecord
from spanjudge.trajectory.steps import Step


@runtime_checkable
class Recogniser(Protocol):
    """Turns one span into steps. ``None`` means "not mine, try the next preset"."""

    name: str

    def recognise(self, span: SpanRecord) -> list[Step] | None: ...


@runtime_checkable
class SessionFinaliser(Protocol):
    """Optional second pass over a whole session (for facts spread over several spans)."""

    def finalise(self, steps: list[Step], spans: Sequence[SpanRecord]) -> list[Step]: ...


class RecogniserFactory(Protocol):
    """Builds a recogniser (a preset class is one). Third-party factories register in the
    `spanjudge.recognisers` entry-point group and are tried before the built-ins: a plugin
    exists to read what the built-in presets misread."""

    def __call__(self) -> Recogniser: ...


# Refusal text that marks a skill load as failed even when the tool reported success.
_REFUSAL_WORDS = (
    "not found",
    "unknown skill",
    "no such skill",
    "is required",
    "does not exist",
    "not available",
    "failed to load",
)
_REFUSALS = re.compile("|".join(rf"\b{word}\b" for word in _REFUSAL_WORDS), re.IGNORECASE)


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimEvidence:
    """What a span must carry for a preset to claim it: a name starting with one of
    ``name_prefixes``, an instrumentation scope in ``scopes``, or one of the ``attributes``.
    A preset that declares it (class attribute `claim_evidence`) promises that its `recognise`
    returns None, before reading anything else, for a span carrying none of them; the registry
    then does not ask it about such spans. A preset without one is asked about every span."""

    name_prefixes: tuple[str, ...] = ()
    scopes: tuple[str, ...] = ()
    attributes: tuple[str, ...] = ()


MAX_DEPTH = 256
"""How deep a decoded value nests at most: a list or object deeper than this is cut, replaced
by `DEPTH_MARK`, whatever parser read it and whatever the interpreter's recursion limit
(whatever reads a value back, `json.dumps` for reports and judges among them, recurses once per
level). What lies above the cut is read as it is: a skill named beside a deep value, a message
history with one deep tool response."""
DEPTH_MARK = f"…[nested deeper than {MAX_DEPTH} levels: cut by spanjudge]"
READ_DEPTH = 1024
"""A text nested deeper than this stays text: orjson reads no deeper, and json reads as deep as
the recursion limit lets it, which differs between interpreters and the tools around them (so
the answer for a text never depends on which read it first)."""


def parse_json(value: AttrValue) -> Any:
    """Decode a JSON string attribute (cut at `MAX_DEPTH`); non-JSON text, and text nested
    deeper than `READ_DEPTH`, are returned as-is."""
    if isinstance(value, str):
        text = value.strip()
        if text[:1] in ("{", "[", '"') or text in ("true", "false", "null"):
            try:
                decoded = _loads(text)
            except ValueError:  # not JSON, or nested too deeply for json: text too
                return value
            if (
                isinstance(decoded, (dict, list))
                and len(text) > 2 * MAX_DEPTH  # (each level opens and closes: a short text is not)
                and text.count("[") + text.count("{") > MAX_DEPTH
                and _nests_deeper(decoded, MAX_DEPTH)
            ):
                return value if _nests_deeper(decoded, READ_DEPTH) else _cut(decoded, 1)
            return decoded
    return value


LITERAL_CHARS = 16_384
"""The longest result text read as a Python literal (`parse_result`); a longer one stays text."""
_LITERAL_ENDS = (("{", "}"), ("[", "]"))
_ESCAPE = r"""\\(?:[\\'"abfnrtv0-7]|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8})"""
# What `repr` writes of dicts and lists of JSON's values, token by token: brackets, commas and
# colons, strings with the escapes it writes, numbers, True, False, None. A text with anything
# else (a name, a call, an operator, an f-string) is no such literal, and is not parsed. Each
# token is told by its first character, and a number runs to its end: no text can be split two
# ways, so the match is linear.
# A string literal as `repr` writes it, quoted either way.
_STRING = rf"'(?:[^'\\\n]|{_ESCAPE})*'" + "|" + rf'"(?:[^"\\\n]|{_ESCAPE})*"'
_LITERAL = re.compile(
    rf"(?:\s|[\[\]{{}}(),:]|{_STRING}|-?\d[\d.eE+-]*(?![\d.eE+-])|True|False|None)*"
)


def parse_result(value: AttrValue) -> Any:
    """`parse_json` of a tool result, and a text that is no JSON but a Python literal object or
    list, as Python frameworks record a tool's return with ``str()`` (``{'status': 'error'}``),
    decoded as the JSON it stands for (tuples as lists; sets, bytes and other values JSON cannot
    hold leave it text). A text longer than `LITERAL_CHARS` is not tried."""
    decoded = parse_json(value)
    if decoded is not value or not isinstance(value, str) or value.lstrip()[:1] not in ("{", "["):
        return decoded  # (JSON, or no text a literal dict or list can be)
    return _python_literal(value)


def parse_arguments(value: AttrValue) -> Any:
    """A tool call's recorded arguments, decoded as a result is (`parse_result`): Python
    frameworks record them with ``str()`` too (``{'skill_name': 'csv-report'}``)."""
    return parse_result(value)


MESSAGE_CHARS = 262_144
"""The longest result text read as a message object's repr (`call_message`)."""
# One `key=value` field of a message object's repr, as pydantic writes it: the value a string
# literal, a number, True, False, None or an empty mapping or list. Each alternative is told by
# its first character: matched field after field, the reading is linear.
_MESSAGE_FIELD = re.compile(
    rf"\s*([A-Za-z_][A-Za-z0-9_]*)=({_STRING}|-?\d+(?:\.\d+)?(?![\d.])|True|False|None|\{{\}}|\[\])"
)


def call_message(
    value: AttrValue, *, call_id: str | None, tool: str | None
) -> dict[str, Any] | None:
    """The fields of a tool result recorded as a message object's repr (LangChain's
    ``content='…' name='load_skill' tool_call_id='call_001'``) when it is this call's message:
    its `tool_call_id` is ``call_id``, or its `name` is ``tool``. Its `content`, a string, is
    what the tool returned. None for any other text, and for one longer than `MESSAGE_CHARS`."""
    if not isinstance(value, str) or len(value) > MESSAGE_CHARS:
        return None
    text = value.strip()
    if not text.startswith("content="):
        return None
    fields: dict[str, Any] = {}
    at = 0
    while at < len(text):
        match = _MESSAGE_FIELD.match(text, at)
        if match is None or match.group(1) in fields:
            return None
        try:  # (one literal token: no name is looked up and no call made)
            fields[match.group(1)] = ast.literal_eval(match.group(2))
        except (ValueError, SyntaxError, MemoryError):
            return None
        at = match.end()
    content = fields.get("content")
    own = fields.get("tool_call_id")
    if not isinstance(content, str) or not (
        (call_id and own == call_id) or (tool and fields.get("name") == tool)
    ):
        return None
    return fields


@remembered_within()  # a session's rules read the same results several times
def _python_literal(value: str) -> Any:
    text = value.strip()
    if (
        len(text) > LITERAL_CHARS
        or (text[:1], text[-1:]) not in _LITERAL_ENDS
        or _LITERAL.fullmatch(text) is None
    ):
        return value
    try:  # (only literals: no name is looked up and no call made)
        literal = ast.literal_eval(text)
        as_json = json.dumps(literal, ensure_ascii=False, allow_nan=False)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return value
    return parse_json(as_json)


def _nests_deeper(value: Any, levels: int) -> bool:
    """Whether `value` nests more than ``levels`` lists and objects deep."""
    stack = [(value, 1)]
    while stack:  # (not recursive: this is the check for what recursion cannot read)
        item, depth = stack.pop()
        if depth > levels:
            return True
        for inner in item.values() if isinstance(item, dict) else item:
            if isinstance(inner, (dict, list)):
                stack.append((inner, depth + 1))
    return False


def _cut(value: dict[str, Any] | list[Any], level: int) -> Any:
    """A copy of ``value``, a list or object at ``level``, with those below `MAX_DEPTH` levels
    replaced by `DEPTH_MARK` (one frame per level, no comprehension's: at most `MAX_DEPTH`)."""
    if level > MAX_DEPTH:
        return DEPTH_MARK
    if isinstance(value, dict):
        copied: dict[str, Any] = {}
        for key, inner in value.items():
            copied[key] = _cut(inner, level + 1) if isinstance(inner, (dict, list)) else inner
        return copied
    items: list[Any] = []
    for inner in value:
        items.append(_cut(inner, level + 1) if isinstance(inner, (dict, list)) else inner)
    return items


@remembered_within()
def read_json(value: str) -> Any:
    """`parse_json` for message payloads, decoded once: a span's output is read for its text,
    its tool requests and its finish reason, and the session's prompts for catalogues.
    Callers never change what it returns."""
    return parse_json(value)


def shared_json(value: AttrValue) -> Any:
    """`parse_json` of a value every span repeats (tool definitions), a text decoded once per
    distinct text (`read_json`): schema checks are cached per decoded object. Read-only."""
    return read_json(value) if isinstance(value, str) else parse_json(value)


def _loads(text: str) -> Any:
    """`json.loads`, through orjson (a few times faster on tool results) where its answer is
    json's: orjson reads an integer beyond 64 bits as a float, so a result holding any float
    is read again by `json.loads` (what it refuses, `jsonfast.loads` already hands to json).
    (A pre-check of the text for number tokens, by a pattern or by `str.translate`, costs
    several times the walk over the decoded result: measured on the fixtures' texts.)"""
    decoded = jsonfast.loads(text)
    return jsonfast.parse(text) if _holds_float(decoded) else decoded


def _holds_float(value: Any) -> bool:
    if not isinstance(value, (dict, list)):
        return isinstance(value, float)
    stack = [value]
    while stack:  # (not recursive: a document may nest as deep as orjson allows)
        item = stack.pop()
        for inner in item.values() if isinstance(item, dict) else item:
            if isinstance(inner, float):
                return True
            if isinstance(inner, (dict, list)):
                stack.append(inner)
    return False


def as_text(value: Any) -> str | None:
    """Render a result or message payload as text for reports and judges."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def is_refusal(text: str | None) -> bool:
    return (
        bool(text)
        and may_match(text or "", _REFUSAL_WORDS)
        and _REFUSALS.search(text or "") is not None
    )


def may_match(text: str, words: tuple[str, ...]) -> bool:
    """False only when a case-insensitive pattern that needs one of ``words`` (lower case)
    cannot match ``text``: ASCII text holding none of them. Searching for the words is much
    cheaper than running the pattern; non-ASCII text is left to the pattern (Unicode case
    folding matches 's' with U+017F, the long s)."""
    if not text.isascii():
        return True
    lowered = text.lower()
    return any(word in lowered for word in words)


# What a Python function's recorded call may hold besides its arguments (OpenInference's
# decorators add the flag for redacting them).
_CALL_RECORD_KEYS = frozenset({"args", "kwargs", "sanitize_inputs_outputs"})


def call_record(value: Any) -> tuple[list[Any], dict[str, Any]] | None:
    """(positional, keyword) arguments of a Python function's call recorded as `{"args":
    [...], "kwargs": {...}}` (how decorators and wrappers write a call; either may be
    missing); None for any other value."""
    if (
        not isinstance(value, dict)
        or not value.keys() & {"args", "kwargs"}
        or not value.keys() <= _CALL_RECORD_KEYS
    ):
        return None
    args, kwargs = value.get("args", []), value.get("kwargs", {})
    if not isinstance(args, list) or not isinstance(kwargs, dict):
        return None
    return args, kwargs


def call_record_arguments(value: Any) -> Any:
    """The arguments of a recorded Python call (`call_record`) as one mapping: its keyword
    arguments, with the positional ones under `args` when there are any, or the one mapping
    it was handed as its only argument. Any other value as it is."""
    record = call_record(value)
    if record is None:
        return value
    args, kwargs = record
    if len(args) == 1 and not kwargs and isinstance(args[0], dict):
        return args[0]  # the one mapping a tool was handed (`run({"city": "Paris"})`)
    return {"args": args, **kwargs} if args else kwargs


# An HTTP-like status in a result payload, in an error envelope: 4xx and 5xx beside an error
# detail say the call failed. A status with no such detail (a link checker's
# `{"url": ..., "status": 404}`) is data the tool reports.
_HTTP_STATUS_KEYS = ("status", "status_code", "statusCode", "http_status", "httpStatus")
_HTTP_DETAIL_KEYS = ("error", "detail", "message")
_ENVELOPE_SIZE = 3


def text_blocks(value: Any) -> list[str] | None:
    """The texts of a list of text blocks (`[{"type": "text", "text": ...}]`: a tool's content
    under MCP, many frameworks' message content and tool responses), in order; None for any
    other value. A block's `type`, when it has one, must name text (`text`, or a variant such as
    OpenAI's `input_text` and `output_text`): reasoning or an image is no text block."""
    if not isinstance(value, list) or not value:
        return None
    texts = []
    for block in value:
        if not isinstance(block, dict):
            return None
        kind, text = block.get("type", "text"), block.get("text")
        if not isinstance(text, str) or not isinstance(kind, str) or not kind.endswith("text"):
            return None
        texts.append(text)
    return texts


def joined_text_blocks(value: Any) -> str | None:
    """The texts of a list of text blocks (`text_blocks`) joined by line breaks; None for any
    other value."""
    texts = text_blocks(value)
    return "\n".join(texts) if texts is not None else None


def error_in_payload(payload: Any) -> str | None:
    """An error inside a result payload (`{"status": "error", ...}`, `is_error`, an error
    envelope with an HTTP-like status of 400 or more) while the span is OK."""
    if isinstance(payload, str):
        if payload.lstrip()[:1] != "{":  # (decoded, only an object can hold an error)
            return None
        decoded = parse_result(payload)
        if decoded is payload:
            return None
        payload = decoded
    if isinstance(payload, dict):
        status = payload.get("status")
        if isinstance(status, str) and status.lower() in ("error", "failed", "failure"):
            detail = payload.get("error") or payload.get("message") or payload.get("content")
            return as_text(detail) or "status: error"
        if payload.get("is_error") is True or payload.get("isError") is True:
            return as_text(payload.get("content")) or "is_error: true"
        code = next((payload[k] for k in _HTTP_STATUS_KEYS if k in payload), None)
        if isinstance(code, str) and code.isascii() and code.isdigit() and len(code) == 3:
            code = int(code)  # (an HTTP status; `isdigit` alone takes "²", which int() does not)
        detail = next((payload[k] for k in _HTTP_DETAIL_KEYS if payload.get(k)), None)
        if (
            isinstance(code, int)
            and not isinstance(code, bool)
            and 400 <= code <= 599
            and detail is not None
            and len(payload) <= _ENVELOPE_SIZE
        ):
            return f"HTTP {code}: {as_text(detail)}"
        if "error" in payload and payload.get("error") and len(payload) <= _ENVELOPE_SIZE:
            return as_text(payload["error"])
    return None


def span_error(span: SpanRecord) -> str | None:
    """Why a span with error status failed: its exception event, else its status message
    (first line: LangChain puts a whole traceback there), else `error.type`. An exception
    event under a status left unset is no failure: the SDK sets the error status itself when
    an exception escapes a span, so one recorded without it was handled."""
    if span.status != "error":
        return None
    found = _exception_of(span)
    if found is not None:
        return found
    first = (span.status_message or "").strip().splitlines()
    if first:
        return first[0]
    return str(span.attributes.get(semconv.ERROR_TYPE) or "span status is error")


def _exception_of(span: SpanRecord) -> str | None:
    """The span's exception event as "type: message"."""
    for event in span.events:
        if event.name == semconv.EV_EXCEPTION:
            kind = event.attributes.get(semconv.EXCEPTION_TYPE)
            text = event.attributes.get(semconv.EXCEPTION_MESSAGE)
            if kind or text:
                return f"{kind}: {text}" if kind and text else str(kind or text)
    return None


def span_fields(span: SpanRecord, preset: str) -> dict[str, Any]:
    """The `Step` fields every preset copies from the span it recognised."""
    return {
        "span_id": span.span_id,
        "trace_id": span.trace_id,
        "parent_span_id": span.parent_span_id,
        "start_unix_nano": span.start_unix_nano,
        "end_unix_nano": span.end_unix_nano,
        "status": span.status,
        "preset": preset,
    }


def first_attr(span: SpanRecord, *keys: str) -> AttrValue:
    for key in keys:
        value = span.attributes.get(key)
        if value is not None:
            return value
    return None


# A count a span can carry: OTLP's integers are 64-bit. Beyond that (a decimal string of
# hundreds of digits, a superscript digit) it is no count: it would overflow the arithmetic
# and the floats of the cost checks and the report.
_COUNT_LIMIT = 2**63
_COUNT_DIGITS = 19


def count_of(value: Any) -> int | None:
    """A recorded count (tokens): an integer, a finite double or a string of ASCII digits,
    within 64 bits; anything else (a bool, NaN, "²", a number of hundreds of digits) is None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        if not math.isfinite(value):  # NaN is no count
            return None
        value = int(value)
    elif isinstance(value, str):
        if not (value.isascii() and value.isdigit() and len(value) <= _COUNT_DIGITS):
            return None
        value = int(value)
    if isinstance(value, int) and -_COUNT_LIMIT <= value < _COUNT_LIMIT:
        return value
    return None


def int_attr(span: SpanRecord, *keys: str) -> int | None:
    return count_of(first_attr(span, *keys))


# How much of a model call's system instructions says which agent is speaking: the opening,
# which a skill or date appended at the end does not change.
_INSTRUCTIONS_OPENING = 256


_DIGITS = re.compile(r"\d+")


def instructions_opening(system: str | None) -> str | None:
    """The opening of a model call's system instructions (`Step.instructions`), or None.
    Digits are left out: a date, a time or a counter at the top of the prompt changes from
    call to call of the same agent."""
    return _opening((system or "")[: 4 * _INSTRUCTIONS_OPENING])


@lru_cache(maxsize=256)  # every model call of an agent repeats its system prompt's opening
def _opening(head: str) -> str | None:
    text = " ".join(_DIGITS.sub("", head).split())
    return text[:_INSTRUCTIONS_OPENING] or None


_FAILED_STATUSES = frozenset({"error", "failed", "failure", "fail"})


def marked_failed(record: Any) -> bool:
    """A tool result's own record (the message or part that holds it, not its payload) marks
    it failed: `is_error` / `isError` true, a failing `status`, or a type that names an error
    (`tool-error`, an output of type `error-text`)."""
    if not isinstance(record, Mapping):
        return False
    if record.get("is_error") is True or record.get("isError") is True:
        return True
    status = record.get("status")
    if isinstance(status, str) and status.lower() in _FAILED_STATUSES:
        return True
    kind = record.get("type")
    if isinstance(kind, str) and "error" in kind.lower():
        return True
    output = record.get("output")
    return (
        isinstance(output, Mapping)
        and isinstance(output.get("type"), str)
        and ("error" in str(output["type"]).lower())
    )
