"""`SpanRecord`: the one normalised span every front end produces and the core consumes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal, TypeAlias, get_args

StatusCode = Literal["unset", "ok", "error"]
SpanKind = Literal["unspecified", "internal", "server", "client", "producer", "consumer"]


# Attribute values after normalisation: OTLP arrays become tuples, kvlists become dicts,
# bytes become lowercase hex strings.
AttrValue: TypeAlias = (
    "str | bool | int | float | tuple[AttrValue, ...] | dict[str, AttrValue] | None"
)
Attributes = Mapping[str, AttrValue]

SPAN_KINDS: tuple[SpanKind, ...] = get_args(SpanKind)
STATUS_CODES: tuple[StatusCode, ...] = get_args(StatusCode)
EMPTY_ATTRS: Attributes = {}


@dataclass(frozen=True, slots=True, kw_only=True)
class SpanEvent:
    name: str
    time_unix_nano: int
    attributes: Attributes = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class SpanLink:
    trace_id: str
    span_id: str
    attributes: Attributes = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class SpanRecord:
    """A finished span, with ids as lowercase hex and times in Unix nanoseconds."""

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    start_unix_nano: int
    end_unix_nano: int
    kind: SpanKind = "internal"
    status: StatusCode = "unset"
    status_message: str | None = None
    attributes: Attributes = field(default_factory=dict)
    events: tuple[SpanEvent, ...] = ()
    links: tuple[SpanLink, ...] = ()
    resource: Attributes = field(default_factory=dict)
    scope_name: str | None = None
    scope_version: str | None = None
    # Attribute values cut to the configured cap; recorded so a report can say so.
    truncated: int = 0

    def attr(self, key: str) -> AttrValue:
        """The span attribute ``key``, falling back to the resource attribute."""
        value = self.attributes.get(key)
        if value is None:
            value = self.resource.get(key)
        return value

    def str_attr(self, key: str) -> str | None:
        value = self.attributes.get(key)
        if value is None:
            return None
        return value if isinstance(value, str) else str(value)

    @property
    def duration_s(self) -> float:
        return max(0, self.end_unix_nano - self.start_unix_nano) / 1e9


# The field order the fast decoders (spans/jsonfast.py, spans/otlp_proto.py) build records in
# (`draft_class` checks it against the class).
SPAN_RECORD_FIELDS = (
    "trace_id",
    "span_id",
    "parent_span_id",
    "name",
    "start_unix_nano",
    "end_unix_nano",
    "kind",
    "status",
    "status_message",
    "attributes",
    "events",
    "links",
    "resource",
    "scope_name",
    "scope_version",
    "truncated",
)


def draft_class(cls: type, names: tuple[str, ...]) -> type:
    """A mutable twin of the slotted record ``cls``, whose fields are exactly ``names`` in order.

    A decoder fills a draft with plain attribute stores (which the interpreter specialises to
    a slot write) and turns it into a ``cls`` with one ``__class__`` assignment: cheaper
    than calling each slot's setter. Python allows that assignment only between classes of the
    same layout (same slots, same base), and checks it here once. The decoder must set every
    field: a slot left unset would raise AttributeError when read."""
    if tuple(f.name for f in fields(cls)) != names or cls.__slots__ != names:  # type: ignore[attr-defined]
        raise RuntimeError(
            f"{cls.__name__} gained or lost a field: update the fast decoders' field list"
            " (spans/record.py SPAN_RECORD_FIELDS, spans/jsonfast.py, spans/otlp_proto.py)"
        )
    twin = type(cls.__name__ + "Draft", (), {"__slots__": names, "__module__": cls.__module__})
    probe: Any = object.__new__(twin)
    probe.__class__ = cls  # TypeError here if the layouts ever differ
    return twin


SPAN_EVENT_FIELDS = ("name", "time_unix_nano", "attributes")
SpanRecordDraft: Any = draft_class(SpanRecord, SPAN_RECORD_FIELDS)
SpanEventDraft: Any = draft_class(SpanEvent, SPAN_EVENT_FIELDS)
