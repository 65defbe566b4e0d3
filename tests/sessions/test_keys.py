"""Session keys from values no agent should send: arrays and very long ids."""

from __future__ import annotations

from spanjudge.sessions.store import SessionStore
from tests.conftest import span


def test_an_array_session_id_is_no_key_and_is_counted() -> None:
    array_of_maps = ('{"a": 1}', '{"b": 2}')  # how OTLP's kvlist items arrive, flattened
    store = SessionStore()
    store.add(span(1, trace=5, attrs={"session.id": array_of_maps}))
    store.add(span(2, trace=6, attrs={"session.id": array_of_maps}, resource={"session.id": "r"}))
    closed = {c.key: c for c in store.close("end_of_input")}
    assert store.refused_keys == 2
    # the first trace is key-less (its own session by trace id); the second falls back to the
    # resource's key
    assert closed["r"].key_source == "session.id"
    (keyless,) = [c for c in closed.values() if c.key != "r"]
    assert keyless.key_source == "trace_id"
    assert not any("{" in key for key in closed)


def test_long_ids_sharing_a_prefix_stay_two_sessions() -> None:
    store = SessionStore()
    long_id = "x" * 70_000
    store.add(span(1, trace=1, attrs={"session.id": long_id + "A"}))
    store.add(span(2, trace=2, attrs={"session.id": long_id + "B"}))
    keys = [c.key for c in store.close("end_of_input")]
    assert len(set(keys)) == 2
    assert all(key.startswith("x" * 256) and "cut" in key and len(key) < 400 for key in keys)
