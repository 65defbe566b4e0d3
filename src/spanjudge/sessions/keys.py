"""Session key precedence (ARCHITECTURE.md section 3)."""

from __future__ import annotations

from collections.abc import Sequence

from spanjudge import semconv
from spanjudge.spans.record import SpanRecord

DEFAULT_KEY_ATTRIBUTES: tuple[str, ...] = (semconv.GEN_AI_CONVERSATION_ID, semconv.SESSION_ID)
TRACE_ID_SOURCE = "trace_id"


def session_key(span: SpanRecord, extra_attributes: Sequence[str] = ()) -> tuple[str, str] | None:
    """(key, source attribute) from the span, then its resource; None when neither has one."""
    attrs = span.attributes
    resource = span.resource
    keys = DEFAULT_KEY_ATTRIBUTES
    if extra_attributes:
        keys = (*keys, *extra_attributes)
    for attribute in keys:
        value = attrs.get(attribute)
        if value is None or value == "":
            value = resource.get(attribute)
            if value is None or value == "":
                continue
        return str(value), attribute
    return None
