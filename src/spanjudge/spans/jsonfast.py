"""The fast road for OTLP JSON: orjson when it is installed, and a strict one-pass decoder.

`decode_fast` answers only for the ordinary case: a document that `orjson` parses and whose
every span has the usual shapes (hex or base64 ids, integer or decimal-string times, scalar or
scalar-array attribute values, nothing to cut). Its records are then exactly those of
``decode_json_document(json.loads(data))``. Anything else (no orjson, invalid JSON, a lone
surrogate, NaN, an odd or bad field, a value over a cap) gets ``None``, and the caller takes
the general road, which says what is wrong and where. The decoder reads every value with its
exact type, so orjson's one silent difference from `json` (an integer literal beyond 64 bits
comes back as a float) can only reach a ``doubleValue``, where both give the same float.

`decode_parsed` is the same decoder for a document `json.loads` already parsed (any line without
orjson): it answers with exactly the general road's records for
the ordinary document, more cheaply, and the general decoder takes the rest.

`parse` (and `loads`, through orjson) reads every JSON text that comes from a trace: an OTLP
JSON document on the general road, JSON inside an attribute value. A lone surrogate in a string
becomes U+FFFD there, for everything downstream.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from spanjudge.spans.ids import id_from_text
from spanjudge.spans.jsonfast_values import _DECLINE, _attrs
from spanjudge.spans.limits import Limits
from spanjudge.spans.record import (
    SPAN_KINDS,
    STATUS_CODES,
    AttrValue,
    SpanEvent,
    SpanLink,
    SpanRecord,
    StatusCode,
)
from spanjudge.spans.sizes import (
    EVENT_BASE,
    LINK_SIZE,
    SPAN_BASE,
)
from spanjudge.spans.text import has_surrogates, valid_strings

_orjson_loads: Callable[[str | bytes], Any] | None
try:
    from orjson import loads as _orjson_loads
except ImportError:  # the product runs on the standard library alone, only slower
    _orjson_loads = None


_KIND_NAMES = {f"SPAN_KIND_{k.upper()}": k for k in SPAN_KINDS}
_STATUS_NAMES = {f"STATUS_CODE_{s.upper()}": s for s in STATUS_CODES}
_HEX_DIGITS = "0123456789abcdefABCDEF"
_ZERO_TRACE = "0" * 32
_ZERO_SPAN = "0" * 16


def available() -> bool:
    """Whether orjson is installed (without it `decode_fast` always answers None)."""
    return _orjson_loads is not None


def loads(data: str | bytes) -> Any:
    """`parse`, through orjson where it can: input orjson refuses (a lone surrogate, NaN,
    1e400, deep nesting) goes to `parse`, so errors and their messages are json's.
    Unlike `json.loads`, an integer literal beyond 64 bits comes back as a float."""
    parse_fast = _orjson_loads
    if parse_fast is not None:
        try:
            return parse_fast(data)
        except ValueError:
            pass
    return parse(data)


# A parsed string holds a lone surrogate only where its text has a `\uD800`-`\uDFFF` escape or
# the surrogate itself (bytes `json.loads` decodes with `surrogatepass`, text read with
# `surrogateescape`); only such texts are walked.
_MAYBE_SURROGATE_BYTES = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_RAW_SURROGATE = re.compile(rb"\xed[\xa0-\xbf]")


class TooDeep(ValueError):
    """JSON text nested deeper than json's parser goes. json raises RecursionError there;
    `parse` raises this instead, a ValueError like every other text that cannot be read, so
    that a reader of JSON from a trace needs no second case for it."""


def parse(data: str | bytes) -> Any:
    """``json.loads(data)`` with every lone surrogate in its strings (keys too) replaced by
    U+FFFD (`spans.text`). Every JSON text read from a trace (an OTLP JSON document, JSON
    inside an attribute value) is parsed here or by `loads`. Bytes that are not UTF-8 inside a
    string of a UTF-8 text are read as U+FFFD too; otherwise raises what `json.loads` raises,
    but `TooDeep` for text nested too deep."""
    try:
        return _parse(data)
    except RecursionError as exc:
        raise TooDeep(str(exc)) from None


def _parse(data: str | bytes) -> Any:
    suspect: bool | None = None  # whether the parsed strings may hold a lone surrogate
    if isinstance(data, bytes):
        utf8 = json.detect_encoding(data) == "utf-8"
        # a UTF-16/32 body (json.loads reads them) hides its escapes from the byte pattern
        suspect = not utf8 or _MAYBE_SURROGATE_BYTES.search(data) is not None
        if suspect and utf8 and _RAW_SURROGATE.search(data) is not None:
            # a surrogate's own bytes are no UTF-8 either: read byte by byte as any bad byte
            # is (json.loads would join the three into one surrogate)
            data = data.decode("utf-8", "surrogateescape")
    try:
        doc = json.loads(data)
    except UnicodeDecodeError:
        if isinstance(data, str) or json.detect_encoding(data) != "utf-8":
            raise
        # bytes that are not UTF-8 in a string (the Collector passes them on unchecked): each
        # is read as a lone surrogate, replaced below
        data = data.decode("utf-8", "surrogateescape")
        doc = json.loads(data)
        suspect = True
    if suspect is None and isinstance(data, str):
        suspect = _SURROGATE_ESCAPE.search(data) is not None or has_surrogates(data)
    return valid_strings(doc) if suspect else doc


def decode_fast(
    data: str | bytes, limits: Limits, sizes: list[int] | None = None
) -> list[SpanRecord] | None:
    """The spans of one OTLP JSON traces document, or None: take the general road. With
    ``sizes``, each span's `spanjudge.spans.sizes.estimate_size` is appended to it, in order
    (worked out while its attributes are read; left as it was when the answer is None)."""
    parse = _orjson_loads
    if parse is None:
        return None
    try:
        doc = parse(data)
    except ValueError:
        return None
    return decode_parsed(doc, limits, sizes)


def decode_parsed(
    doc: Any, limits: Limits, sizes: list[int] | None = None
) -> list[SpanRecord] | None:
    """`decode_fast` of a document already parsed (by orjson, or by `json.loads`: then its
    records are exactly ``decode_json_document(doc)``'s), or None."""
    state = _Document()
    try:
        records = _document(doc, limits, state)
    except Exception:  # any odd shape: the general decoder says what it is
        return None
    if sizes is not None:
        sizes.extend(state.sizes)
    return records


class _Document:
    """What the decoding of one document shares between its spans."""

    __slots__ = ("sizes", "span_ids", "trace_ids")

    def __init__(self) -> None:
        self.sizes: list[int] = []
        # id text -> normalised id: a document's spans share a trace id, and a parent id is
        # another span's id (a trace id and a span id never share a memo: their lengths differ)
        self.trace_ids: dict[Any, str] = {}
        self.span_ids: dict[Any, str] = {}


def _document(doc: Any, limits: Limits, state: _Document) -> list[SpanRecord]:
    resource_spans = doc["resourceSpans"]
    if type(resource_spans) is not list:
        raise _DECLINE
    records: list[SpanRecord] = []
    append = records.append
    for rs in resource_spans:
        if type(rs) is not dict:
            raise _DECLINE
        res = rs.get("resource")
        if res is None:
            resource: dict[str, AttrValue] = {}
        elif type(res) is dict:
            resource = _attrs(res.get("attributes"), limits)[0]
        else:
            raise _DECLINE
        scope_spans = rs.get("scopeSpans") or rs.get("scope_spans") or []
        if type(scope_spans) is not list:
            raise _DECLINE
        for ss in scope_spans:
            if type(ss) is not dict:
                raise _DECLINE
            spans = ss.get("spans") or []
            if type(spans) is not list:
                raise _DECLINE
            scope = ss.get("scope")
            scope_name = scope_version = None
            if type(scope) is dict:
                scope_name = _optional_text(scope.get("name"))
                scope_version = _optional_text(scope.get("version"))
            elif scope:
                raise _DECLINE
            for span in spans:
                append(_span(span, resource, scope_name, scope_version, limits, state))
    return records


def _optional_text(value: Any) -> str | None:
    if value is None or value.__class__ is str:
        return value or None
    raise _DECLINE


def _hex_id(text: Any, size: int, zero: str, what: str) -> str:
    if text.__class__ is not str:
        raise _DECLINE
    if len(text) == 2 * size and not text.strip(_HEX_DIGITS):
        value: str = text.lower()
        if value == zero:
            raise _DECLINE
        return value
    return id_from_text(text, size, what)  # base64 (protobuf JSON mapping); IdError declines


def _span(
    span: Any,
    resource: dict[str, AttrValue],
    scope_name: str | None,
    scope_version: str | None,
    limits: Limits,
    state: _Document,
) -> SpanRecord:
    trace_ids = state.trace_ids
    span_ids = state.span_ids
    get = span.get  # AttributeError (span not a dict) declines
    text: Any = get("traceId")
    trace_id = trace_ids.get(text)  # an unhashable id raises TypeError: declines
    if trace_id is None:
        trace_id = trace_ids[text] = _hex_id(text, 16, _ZERO_TRACE, "traceId")
    text = get("spanId")
    span_id = span_ids.get(text)
    if span_id is None:
        span_id = span_ids[text] = _hex_id(text, 8, _ZERO_SPAN, "spanId")
    parent = get("parentSpanId")
    if not parent or parent == _ZERO_SPAN or parent == "AAAAAAAAAAA=":
        parent = None
    else:
        text = parent
        parent = span_ids.get(text)
        if parent is None:
            parent = span_ids[text] = _hex_id(text, 8, _ZERO_SPAN, "parentSpanId")
        if parent == span_id:
            raise _DECLINE
    kind = get("kind")
    if kind.__class__ is int and 0 <= kind < 6:
        kind = SPAN_KINDS[kind]
    elif kind is None:
        kind = "unspecified"
    else:
        kind = _KIND_NAMES[kind]  # KeyError (or TypeError) declines
    status_obj = get("status")
    status: StatusCode = "unset"
    message = None
    if status_obj:
        code = status_obj.get("code")  # AttributeError (not a dict) declines
        if code.__class__ is int and 0 <= code < 3:
            status = STATUS_CODES[code]
        elif code is not None:
            status = _STATUS_NAMES[code]
        message = status_obj.get("message")
        if message is not None and message.__class__ is not str:
            raise _DECLINE
        message = message or None
    start = get("startTimeUnixNano", 0)
    if start.__class__ is str:
        start = int(start)  # ValueError declines
    elif start.__class__ is not int:
        raise _DECLINE
    end = get("endTimeUnixNano", start)
    if end.__class__ is str:
        end = int(end)
    elif end.__class__ is not int:
        raise _DECLINE
    if end < start:
        raise _DECLINE
    name = get("name", "")
    if name.__class__ is not str:
        raise _DECLINE
    attributes, size = _attrs(get("attributes"), limits)
    size += SPAN_BASE + len(name)
    events: tuple[SpanEvent, ...] = ()
    raw_events = get("events")
    if raw_events:
        # not a list: declines when its items are read
        if len(raw_events) > limits.max_events_per_span:
            raise _DECLINE
        out = []
        for ev in raw_events:
            ev_name = ev.get("name", "")  # AttributeError (ev not a dict) declines
            when = ev.get("timeUnixNano", 0)
            if ev_name.__class__ is not str:
                raise _DECLINE
            if when.__class__ is str:
                when = int(when)  # ValueError declines
            elif when.__class__ is not int:
                raise _DECLINE
            ev_attrs, ev_size = _attrs(ev.get("attributes"), limits)
            out.append(SpanEvent(name=ev_name, time_unix_nano=when, attributes=ev_attrs))
            size += EVENT_BASE + len(ev_name) + ev_size
        events = tuple(out)
    links: tuple[SpanLink, ...] = ()
    raw_links = get("links")
    if raw_links:
        if type(raw_links) is not list:
            raise _DECLINE
        links = tuple(
            SpanLink(
                trace_id=_hex_id(link["traceId"], 16, _ZERO_TRACE, "traceId"),
                span_id=_hex_id(link["spanId"], 8, _ZERO_SPAN, "spanId"),
            )
            for link in raw_links
        )
        size += len(links) * LINK_SIZE
    record = SpanRecord(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent,
        name=name,
        start_unix_nano=start,
        end_unix_nano=end,
        kind=kind,
        status=status,
        status_message=message,
        attributes=attributes,
        events=events,
        links=links,
        resource=resource,
        scope_name=scope_name,
        scope_version=scope_version,
    )
    state.sizes.append(size)
    return record
