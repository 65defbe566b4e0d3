"""Records the fast decoders build through a draft (spans/record.py `draft_class`)."""

from __future__ import annotations

import pickle
from dataclasses import FrozenInstanceError

import pytest

from spanjudge.spans.record import SpanEvent, SpanEventDraft, draft_class


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
