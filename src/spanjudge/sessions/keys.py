"""Session key precedence (ARCHITECTURE.md section 3): `gen_ai.conversation.id`, `session.id`,
the configured attributes, then a namespaced copy of a standard key; on the span, then its
resource.

A copy of a standard key under another name is a bare `conversation.id`, a standard key spelled
as a keyword argument spells it (`conversation_id`, `session_id`: a Python keyword cannot hold
a dot, so APIs that take attributes as keyword arguments, such as Logfire's spans and baggage,
write it so), then an attribute whose name ends as a standard key's does after a namespace
(`<namespace>.conversation.id`, `<namespace>.session.id`), or a conversation or session id the
user attached in a bag of metadata or properties (`<ns>.properties.session_id`,
`<ns>.metadata.sessionId`): the forms tracing libraries give the session id they record under
their own name. Names that only mention a session in another form (a vendor's "session" that
is its project, `langsmith.trace.session_id`) say nothing certain and are left to
`sessions.key_attributes`; so is `mcp.session.id`, which ends the same way but names a protocol
connection that conversations share. Among several namespaced copies the conversation ones
come first, as the standard keys do, then by name, so the choice never depends on attribute
order.

A key longer than `MAX_KEY_CHARS` keeps its first characters and a hash of the whole, so two
long ids that share a prefix stay two sessions, and the id shown in the report says it was cut.
A key attribute that is not a string or an integer (an array, say), or whose text is only the
placeholder an instrumentation writes for a value it hid (`trajectory/hidden.py`: Logfire's
default scrubbing writes `[Scrubbed due to 'session']` for every session id), is no key: it
is skipped as if absent, so hidden ids never merge every session into one, and the caller told
(the session store counts it: `spanjudge.session_keys_refused`)."""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence

from spanjudge import semconv
from spanjudge.spans.otlp_proto import SpanHead
from spanjudge.spans.record import SpanRecord
from spanjudge.trajectory.hidden import hidden

DEFAULT_KEY_ATTRIBUTES: tuple[str, ...] = (semconv.GEN_AI_CONVERSATION_ID, semconv.SESSION_ID)
# a conversation or session id the user attached in a bag of metadata or properties
# (OpenLLMetry's and Laminar's `<ns>.association.properties.session_id`, Vercel AI's
# `ai.telemetry.metadata.sessionId`): the bag says the user gave it, its name what it is
_USER_BAG_SUFFIXES = tuple(
    f".{bag}.{name}"
    for bag in ("metadata", "properties")
    for name in ("conversation_id", "conversationId", "session_id", "sessionId")
)
# what a namespaced copy of a standard key ends with
NAMESPACED_KEY_SUFFIXES: tuple[str, ...] = (
    ".conversation.id",
    "." + semconv.SESSION_ID,
    *_USER_BAG_SUFFIXES,
)
_CONVERSATION_ENDS = (".conversation.id", ".conversation_id", ".conversationId")
# a standard key's name without its namespace (VoltAgent's `conversation.id`) or as a keyword
# argument spells it (no namespace either): tried right after the configured attributes, before
# any namespaced copy, the conversation ones first
BARE_KEY_COPIES: tuple[str, ...] = ("conversation.id", "conversation_id", "session_id")
_NAMED = (*DEFAULT_KEY_ATTRIBUTES, *BARE_KEY_COPIES)  # the keys tried by name, unconfigured
_NOT_KEYS = frozenset({*DEFAULT_KEY_ATTRIBUTES, semconv.MCP_SESSION_ID})
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


def decides(value: object) -> bool:
    """A named key attribute's ``value`` settles the span's key, so that no namespaced copy is
    looked at: a text that hides nothing, or an integer (`_first_key`)."""
    if type(value) is str:
        return bool(value) and not hidden(value)
    return isinstance(value, int) and not isinstance(value, bool)


def namespaced_keys(names: Iterable[str], tried: Sequence[str] = ()) -> list[str]:
    """The namespaced copies of a standard key among ``names`` (less those in ``tried``), in
    precedence order."""
    found = {n for n in names if n.endswith(NAMESPACED_KEY_SUFFIXES)} - _NOT_KEYS
    found.difference_update(tried)
    return sorted(found, key=lambda n: (not n.endswith(_CONVERSATION_ENDS), n))


def session_key(
    span: SpanRecord | SpanHead,
    extra_attributes: Sequence[str] = (),
    refused: Callable[[], None] = _ignore,
) -> tuple[str, str] | None:
    """(key, source attribute) from the span, then its resource; None when neither has one.
    ``refused()`` is called for each key attribute skipped for its value's type."""
    attrs = span.attributes
    resource = span.resource
    keys = (
        (*DEFAULT_KEY_ATTRIBUTES, *extra_attributes, *BARE_KEY_COPIES)
        if extra_attributes
        else _NAMED
    )
    found = _first_key(keys, attrs, resource, refused)
    if found is None:
        namespaced = namespaced_keys(itertools.chain(attrs, resource), keys)
        if namespaced:
            found = _first_key(namespaced, attrs, resource, refused)
    return found


def _first_key(
    keys: Sequence[str],
    attrs: Mapping[str, object],
    resource: Mapping[str, object],
    refused: Callable[[], None],
) -> tuple[str, str] | None:
    for attribute in keys:
        on_span = attrs.get(attribute)
        if type(on_span) is str and 0 < len(on_span) <= MAX_KEY_CHARS and not hidden(on_span):
            return on_span, attribute  # the usual key, as is
        if on_span is None and attribute not in resource:  # a key attribute the span lacks
            continue
        for value in (on_span, resource.get(attribute)):
            if value is None or value == "":
                continue
            if isinstance(value, str) and not hidden(value):
                return key_text(value), attribute
            if isinstance(value, int) and not isinstance(value, bool):
                return str(value), attribute
            refused()
    return None
