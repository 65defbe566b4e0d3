"""A span's GenAI messages are read with one look when it records none (most spans), and that
look never hides messages that are there: `messages` answers what reading each list in full
(`_messages`) answers, for spans holding the messages in any form the readers know, or none."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from spanjudge.recognition import genai
from spanjudge.spans.record import SpanEvent, SpanRecord

_MESSAGES = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "hi"}]}])
_VERTEX = json.dumps({"contents": [{"role": "user", "parts": [{"text": "hello"}]}]})
KEYS = st.sampled_from(
    [
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gcp.vertex.agent.llm_request",
        "gen_ai.prompt.0.role",
        "gen_ai.prompt.0.content",
        "gen_ai.completion.0.role",
        "gen_ai.completion.0.content",
        "gen_ai.operation.name",
    ]
)
VALUES = st.sampled_from([_MESSAGES, _VERTEX, "user", "assistant", "plain text", "chat"])
EVENT_NAMES = st.sampled_from(
    ["gen_ai.client.inference.operation.details", "gen_ai.user.message", "gen_ai.choice"]
)
EVENTS = st.lists(
    st.builds(
        lambda name, attributes: SpanEvent(name=name, time_unix_nano=1, attributes=attributes),
        EVENT_NAMES,
        st.dictionaries(KEYS, VALUES, max_size=3),
    ),
    max_size=3,
)


@settings(max_examples=300, deadline=None)
@given(attributes=st.dictionaries(KEYS, VALUES, max_size=4), events=EVENTS)
def test_messages_are_what_reading_them_in_full_gives(
    attributes: dict[str, str], events: list[SpanEvent]
) -> None:
    span = SpanRecord(
        trace_id="a" * 32,
        span_id="b" * 16,
        parent_span_id=None,
        name="chat m",
        start_unix_nano=1,
        end_unix_nano=2,
        attributes=attributes,
        events=tuple(events),
    )
    for key in ("gen_ai.input.messages", "gen_ai.output.messages"):
        assert genai.messages(span, key) == genai._messages(span, key)


def test_a_span_with_messages_in_an_event_gets_them() -> None:
    details = SpanEvent(
        name="gen_ai.client.inference.operation.details",
        time_unix_nano=1,
        attributes={"gen_ai.input.messages": _MESSAGES},
    )
    span = SpanRecord(
        trace_id="a" * 32,
        span_id="c" * 16,
        parent_span_id=None,
        name="chat m",
        start_unix_nano=1,
        end_unix_nano=2,
        events=(details,),
    )
    assert genai.last_user_text(span) == "hi"
    assert genai.messages(span, "gen_ai.output.messages") == []
