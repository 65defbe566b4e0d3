"""Records the fast decoders build through a draft (spans/record.py `draft_class`)."""

from __future__ import annotations

import pickle
from dataclasses import FrozenInstanceError

import pytest

from spanjudge.spans.record import SpanEvent, SpanEventDraft, SpanLink, SpanRecord, draft_class


def _drafted(name: str, when: int) -> SpanEvent:
    event = object.__new__(SpanEventDraft)
    event.name = name
    event.time_unix_nano = when
    event.attributes = {"k": "v"}
    event.__class__ = SpanEvent
    return event  # type: ignore[no-any-return]


def test_a_drafted_record_is_the_record_its_init_makes() -> None:
    made = SpanEvent(name="gen_ai.choice", time_unix_nano=5, attributes={"k": "v"})
    drafted = _drafted("gen_ai.choice", 5)
    assert type(drafted) is SpanEvent
    assert drafted == made
    assert repr(drafted) == repr(made)
    assert pickle.loads(pickle.dumps(drafted)) == made
    with pytest.raises(FrozenInstanceError):
        drafted.name = "other"  # type: ignore[misc]


def test_a_field_list_that_is_not_the_records_is_refused() -> None:
    with pytest.raises(RuntimeError, match="gained or lost a field"):
        draft_class(SpanEvent, ("name", "time_unix_nano"))
    with pytest.raises(RuntimeError, match="gained or lost a field"):
        draft_class(SpanEvent, ("time_unix_nano", "name", "attributes"))


def test_a_record_crosses_a_pickle_whole() -> None:
    # What a JSON request's records go through on their way to an evaluation process.
    record = SpanRecord(
        trace_id="0af7651916cd43dd8448eb211c80319c",
        span_id="b7ad6b7169203331",
        parent_span_id="00f067aa0ba902b7",
        name="execute_tool read_file",
        start_unix_nano=1_700_000_000_000_000_000,
        end_unix_nano=1_700_000_000_500_000_000,
        kind="client",
        status="error",
        status_message="no such file",
        attributes={"gen_ai.tool.name": "read_file", "n": 3, "tags": ("a", "b")},
        events=(
            SpanEvent(name="gen_ai.tool.message", time_unix_nano=7, attributes={"x": 1.5}),
            SpanEvent(name="exception", time_unix_nano=8),
        ),
        links=(SpanLink(trace_id="1" * 32, span_id="2" * 16, attributes={"why": "retry"}),),
        resource={"service.name": "agent"},
        scope_name="strands.telemetry.tracer",
        scope_version="1.0",
        truncated=2,
    )
    again = pickle.loads(pickle.dumps([record, record.events[0], record.links[0]]))
    assert again == [record, record.events[0], record.links[0]]
    assert [type(e) for e in again[0].events] == [SpanEvent, SpanEvent]
    assert type(again[0].links[0]) is SpanLink
    with pytest.raises(FrozenInstanceError):
        again[0].name = "other"
    bare = SpanRecord(
        trace_id="1" * 32, span_id="2" * 16, parent_span_id=None, name="", start_unix_nano=0,
        end_unix_nano=0,
    )  # fmt: skip
    assert pickle.loads(pickle.dumps(bare)) == bare
