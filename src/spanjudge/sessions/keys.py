"""Session key precedence (ARCHITECTURE.md section 3): `session.id`, `gen_ai.conversation.id`,
then the configured attributes; on the span, then its resource.

`session.id` comes first because where a span names both and they differ, the conversation is
a part of the session: OpenTelemetry's session is everything the user does in the application,
and an instrumentation may start a conversation id per call (one per turn) under the session
the application set. Taking the wider one never splits a session between two keys.

A key longer than `MAX_KEY_CHARS` keeps its first characters and a hash of the whole, so two
long ids that share a prefix stay two sessions, and the id shown in the report says it was cut.
A key attribute that is not a string or an integer (an array, say) is no key: it is skipped as
if absent, and the caller told (the session store counts it: `spanjudge.session_keys_refused`)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

from spanjudge import semconv
from spanjudge.spans.otlp_proto import SpanHead
from spanjudge.spans.record import SpanRecord

DEFAULT_KEY_ATTRIBUTES: tuple[str, ...] = (semconv.SESSION_ID, semconv.GEN_AI_CONVERSATION_ID)
TRACE_ID_SOURCE = "trace_id"
MAX_KEY_CHARS = 256
CUT_MARK = "…[session id cut by spanjudge; sha256 {digest}]"


def _ignore() -> None:
    return None


def key_text(value: str) -> str:
    """``value`` as a session key: itself, or cut to a prefix plus a hash of the whole."""
    if len(value) <= MAX_KEY_CHARS:
        return value
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return value[:MAX_KEY_CHARS] + CUT_MARK.format(digest=digest)


def session_key(
    span: SpanRecord | SpanHead,
    extra_attributes: Sequence[str] = (),
    refused: Callable[[], None] = _ignore,
) -> tuple[str, str] | None:
    """(key, source attribute) from the span, then its resource; None when neither has one.
    ``refused()`` is called for each key attribute skipped for its value's type."""
    attrs = span.attributes
    resource = span.resource
    keys = DEFAULT_KEY_ATTRIBUTES
    if extra_attributes:
        keys = (*keys, *extra_attributes)
    for attribute in keys:
        on_span = attrs.get(attribute)
        if type(on_span) is str and 0 < len(on_span) <= MAX_KEY_CHARS:  # the usual key, as is
            return on_span, attribute
        if on_span is None and attribute not in resource:  # a key attribute the span lacks
            continue
        for value in (on_span, resource.get(attribute)):
            if value is None or value == "":
                continue
            if isinstance(value, str):
                return key_text(value), attribute
            if isinstance(value, int) and not isinstance(value, bool):
                return str(value), attribute
            refused()
    return None
