"""Session keys from values no agent should send: arrays and very long ids."""

from __future__ import annotations

from spanjudge.sessions.keys import session_key
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


def test_a_namespaced_session_id_is_a_key_and_its_trace_follows_it() -> None:
    store = SessionStore()
    store.add(span(1, trace=1, attrs={"acme.ops.session.id": "s-1"}))
    store.add(span(2, trace=1, parent=1))  # key-less: joins its trace's key
    store.add(span(3, trace=2, resource={"acme.conversation.id": "c-1"}))
    closed = {c.key: c for c in store.close("end_of_input")}
    assert sorted(closed) == ["c-1", "s-1"]
    assert closed["s-1"].key_source == "acme.ops.session.id"
    assert len(closed["s-1"].spans) == 2
    assert closed["c-1"].key_source == "acme.conversation.id"


def test_standard_and_configured_keys_come_before_a_namespaced_one() -> None:
    namespaced = {"acme.session.id": "namespaced"}
    assert session_key(span(1, attrs={**namespaced, "session.id": "s"})) == ("s", "session.id")
    assert session_key(span(1, attrs=namespaced, resource={"gen_ai.conversation.id": "c"})) == (
        "c",
        "gen_ai.conversation.id",
    )
    assert session_key(span(1, attrs={**namespaced, "app.thread": "t"}), ("app.thread",)) == (
        "t",
        "app.thread",
    )


def test_namespaced_keys_are_chosen_whatever_their_order() -> None:
    both = [("z.session.id", "sess"), ("b.conversation.id", "b"), ("a.conversation.id", "a")]
    for attrs in (both, both[::-1]):
        assert session_key(span(1, attrs=dict(attrs))) == ("a", "a.conversation.id")
    refused = []
    found = session_key(
        span(1, attrs={"a.session.id": ["x"], "b.session.id": "b"}), (), lambda: refused.append(1)
    )
    assert found == ("b", "b.session.id") and refused == [1]


def test_a_bare_conversation_id_is_a_key_before_any_namespaced_copy() -> None:
    attrs = {"conversation.id": "conv", "a.conversation.id": "other", "a.session.id": "sess"}
    assert session_key(span(1, attrs=attrs)) == ("conv", "conversation.id")
    assert session_key(span(1, attrs={"conversation.id": "conv"})) == ("conv", "conversation.id")
    # the standard keys and the configured ones still come first
    assert session_key(span(1, attrs={**attrs, "session.id": "s"})) == ("s", "session.id")
    configured = session_key(span(1, attrs={**attrs, "app.thread": "t"}), ("app.thread",))
    assert configured == ("t", "app.thread")


def test_a_standard_key_spelled_as_a_keyword_argument_is_a_key() -> None:
    store = SessionStore()
    store.add(span(1, trace=1, attrs={"session_id": "s-1"}))
    store.add(span(2, trace=1, parent=1))  # key-less: joins its trace's key
    store.add(span(3, trace=2, attrs={"session_id": "s-1", "conversation_id": "c-1"}))
    closed = {c.key: c for c in store.close("end_of_input")}
    assert sorted(closed) == ["c-1", "s-1"]
    assert closed["s-1"].key_source == "session_id" and len(closed["s-1"].spans) == 2
    assert closed["c-1"].key_source == "conversation_id"
    # the standard keys come first, and a keyword spelling beats a namespaced copy
    assert session_key(span(1, attrs={"session_id": "k", "session.id": "s"})) == ("s", "session.id")
    assert session_key(span(1, attrs={"session_id": "k", "a.session.id": "n"})) == (
        "k",
        "session_id",
    )


def test_a_hidden_session_id_is_no_key_and_merges_nothing() -> None:
    scrubbed = "[Scrubbed due to 'session']"  # Logfire's default scrubbing of any session id
    store = SessionStore()
    store.add(span(1, trace=1, attrs={"session.id": scrubbed}))
    store.add(span(2, trace=2, attrs={"session_id": scrubbed}))
    store.add(span(3, trace=3, attrs={"app.session.id": scrubbed}))
    store.add(span(4, trace=4, attrs={"session.id": scrubbed}, resource={"session.id": "r"}))
    closed = {c.key: c for c in store.close("end_of_input")}
    assert store.refused_keys == 4
    # each trace stays its own session (by trace id), or takes the resource's real key
    assert closed["r"].key_source == "session.id"
    sources = sorted(c.key_source for c in closed.values())
    assert sources == ["session.id", "trace_id", "trace_id", "trace_id"]
    assert scrubbed not in closed


def test_a_session_id_the_user_attached_as_metadata_is_a_key() -> None:
    for name in (
        "traceloop.association.properties.session_id",
        "lmnr.association.properties.session_id",
        "ai.telemetry.metadata.sessionId",
        "langsmith.metadata.conversation_id",
    ):
        assert session_key(span(1, attrs={name: "x"})) == ("x", name), name
    # a conversation id before a session id, as the standard keys come
    both = {"a.metadata.sessionId": "s", "z.properties.conversationId": "c"}
    assert session_key(span(1, attrs=both)) == ("c", "z.properties.conversationId")


def test_names_that_only_mention_a_session_are_no_key() -> None:
    for name in (
        "mcp.session.id",  # a protocol connection that conversations share
        "acme.trace.session_id",  # a vendor's "session" that is its project, say
        "acme.session",
        "acme_session.id",
        "acme.session.identifier",
    ):
        assert session_key(span(1, attrs={name: "x"})) is None, name
