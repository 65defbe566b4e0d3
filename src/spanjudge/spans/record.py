"""`SpanRecord`: the one normalised span every front end produces and the core consumes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, TypeAlias, get_args

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
