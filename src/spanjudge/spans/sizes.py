"""What the session store's memory budget charges for a span (`sessions/sizes.py`: a session).

The figures follow CPython's object sizes (`sys.getsizeof`), not bare string lengths: a span's
record, its ids and times, its name, its attribute dict with its keys and values, its events,
and the store's own entries for it (the slot in the session's list, its `(trace_id, span_id)`
tuple in the session's `seen` set). The request's resource is shared by its spans and not
charged. bench/bench_memory_budget.py compares the estimate with tracemalloc and
bench/bench_sidecar_load.py with the process's RSS; the first also times it against the
previous estimate (a loop over string lengths as cheap as this one, that undercounted 1.5-1.9x:
it charged too little per attribute and one byte per character of any text).

The fast JSON decoder (`spans/jsonfast.py`) and the protobuf decoder (`spans/otlp_proto.py`)
work out the same figure while they read a span's attributes, so the store does not walk them a
second time; `estimate_size` is the definition (tests/spans check that they agree).
"""

from __future__ import annotations

from sys import getsizeof

from spanjudge.spans.record import Attributes, AttrValue, SpanEvent, SpanRecord

STR_HEADER = _STR = getsizeof("")  # a str object without its characters (ASCII)
_KEY = _STR + 24  # an attribute key: a str of a typical name's length (`gen_ai.tool.name`)
# a dict entry: its slot in the table at CPython's load factor, its key, a value object's header
ENTRY_SIZE = _ENTRY = 40 + _KEY + _STR
ENTRY_BASE = _DICT = getsizeof({})
_NANOS = getsizeof(1_700_000_000_000_000_000)  # a Unix-nanosecond time
_HEX32, _HEX16 = getsizeof("0" * 32), getsizeof("0" * 16)
_SEEN = getsizeof(("", "")) + 2 * 8 * 2  # the tuple, and its set slot at the table's load
SPAN_BASE = (
    getsizeof(
        SpanRecord(
            trace_id="",
            span_id="",
            parent_span_id=None,
            name="",
            start_unix_nano=0,
            end_unix_nano=0,
        )
    )
    + _HEX32
    + 2 * _HEX16  # span and parent ids
    + 2 * _NANOS
    + _SEEN
    + 8  # the session list's slot
    + _STR  # the name's str object (its characters are added per span)
)
EVENT_BASE = getsizeof(SpanEvent(name="", time_unix_nano=0)) + _NANOS + 8 + _STR
LINK_SIZE = EVENT_BASE + _HEX32 + _HEX16
_NESTED = frozenset({tuple, dict})


def attributes_size(attrs: Attributes) -> int:
    """An attribute dict: per entry its slot, key and value object; plus the text of string
    values at their width (1 byte a character when ASCII, else what CPython holds), and the
    elements of array and kvlist values (tuples and dicts)."""
    size = _DICT + len(attrs) * _ENTRY
    for value in attrs.values():
        if type(value) is str:
            size += len(value) if value.isascii() else getsizeof(value) - _STR
        elif type(value) in _NESTED:
            size += nested_size(value)  # type: ignore[arg-type]
    return size


def content_size(value: AttrValue) -> int:
    """What `attributes_size` adds for one value beyond its entry."""
    if type(value) is str:
        return len(value) if value.isascii() else getsizeof(value) - _STR
    if type(value) in _NESTED:
        return nested_size(value)  # type: ignore[arg-type]
    return 0


def nested_size(value: tuple[AttrValue, ...] | dict[str, AttrValue]) -> int:
    """An array (tuple) or kvlist (dict) value beyond the value header already charged."""
    if isinstance(value, dict):
        return attributes_size(value)
    size = getsizeof(value) - _STR
    for item in value:
        if isinstance(item, (tuple, dict)):
            size += _STR + nested_size(item)
        elif item is not None and not isinstance(item, bool):  # None, bools: shared objects
            size += getsizeof(item)
    return size


def estimate_size(span: SpanRecord) -> int:
    """Bytes a retained span costs, for the memory budget (see the module docstring)."""
    size = SPAN_BASE + len(span.name)
    if span.attributes:
        size += attributes_size(span.attributes)
    for event in span.events:
        size += EVENT_BASE + len(event.name)
        if event.attributes:
            size += attributes_size(event.attributes)
    if span.links:
        size += len(span.links) * LINK_SIZE
    return size
