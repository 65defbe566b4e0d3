"""The session store's memory budget (`sessions.max_open_bytes`): its estimate follows the memory
the retained spans really take (tracemalloc), and it covers key-less traces and the spans kept
for the last closed sessions, not only open sessions."""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

from spanjudge.config import parse_config
from spanjudge.sessions import store as store_module
from spanjudge.sessions.store import ClosePolicy, SessionStore
from spanjudge.spans.files import read_input
from tests.conftest import span
from tests.support.memory import bytes_kept

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted((ROOT / "fixtures").glob("*/*.jsonl"))


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _traced(fill: Callable[[SessionStore], None]) -> tuple[int, SessionStore]:
    """Bytes the store holds after ``fill`` (records decoded inside the measured window)."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        store = SessionStore(ClosePolicy(idle_timeout_s=1e9, max_age_s=None))
        fill(store)
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before, store
    finally:
        tracemalloc.stop()


def test_estimate_follows_real_memory_of_fixture_spans() -> None:
    limits = parse_config({}).limits

    def fill(store: SessionStore) -> None:
        for path in FILES:
            for chunk in read_input(str(path), limits, lambda error: None):
                store.add_all(chunk.spans)

    real, store = _traced(fill)
    assert len(store.open) > 100
    # every span in an open session but for one small key-less trace
    assert 0.77 <= real / store.open_bytes <= 1.3, (real, store.open_bytes)


def test_estimate_follows_real_memory_of_non_ascii_text() -> None:
    def fill(store: SessionStore) -> None:
        for i in range(400):
            text = f"{i}: " + "检查日志并总结 🚀 " * 40  # 4 bytes a character in CPython
            store.add(span(i, trace=i // 4 + 1, attrs={"session.id": f"s{i // 4}", "out": text}))

    real, store = _traced(fill)
    assert 0.77 <= real / store.open_bytes <= 1.3, (real, store.open_bytes)


def test_keyless_traces_count_against_the_budget() -> None:
    store = SessionStore(ClosePolicy(max_open_bytes=20_000, idle_timeout_s=600))
    for i in range(1, 41):  # no session key: each waits as a key-less trace
        store.add(span(i, trace=i, attrs={"blob": "x" * 1000}))
    evicted = store.close()
    assert evicted and all(c.reason == "evicted" and not c.complete for c in evicted)
    assert evicted[0].key == format(1, "032x")  # the oldest trace first
    assert store.memory_bytes <= 20_000
    assert store.evicted == len(evicted)


def test_spans_kept_for_closed_sessions_count_against_the_budget() -> None:
    clock = Clock()
    store = SessionStore(
        ClosePolicy(
            per_turn=False, max_open_bytes=30_000, idle_timeout_s=10, keep_closed_sessions=1000
        ),
        clock=clock,
    )
    peak = 0
    for s in range(12):  # one session at a time, each closed idle before the next opens
        for i in range(5):
            store.add(
                span(s * 10 + i + 1, trace=s + 1, attrs={"session.id": f"s{s}", "b": "y" * 900})
            )
        clock.now += 10
        [closed] = store.close()
        assert closed.reason == "idle" and closed.complete
        peak = max(peak, getattr(store, "memory_bytes", 0))
    # a late span for the first session: its earlier spans were let go to stay in budget, so
    # it re-opens as a partial revision (not whole, as when its spans were still kept)
    store.add(span(999, trace=1, attrs={"session.id": "s0"}))
    [again] = store.close("end_of_input")
    assert again.key == "s0" and again.revision == 2
    assert again.partial and len(again.spans) == 1
    # the latest one is still kept whole
    store.add(span(998, trace=12, attrs={"session.id": "s11"}))
    [latest] = store.close("end_of_input")
    assert not latest.partial and len(latest.spans) == 6
    assert 0 < peak <= 30_000


def test_estimate_follows_real_memory_of_array_and_kvlist_values() -> None:
    """OTLP array and kvlist values (tuples and dicts here) are charged by their elements: an
    attribute of many long strings is not one small object to the budget."""

    def fill(store: SessionStore) -> None:
        for i in range(200):
            attrs = {
                "session.id": f"s{i // 4}",
                "tags": tuple(f"{i}-{n}-" + "t" * 300 for n in range(20)),
                "doc": {"title": f"{i} " + "d" * 500, "parts": (1, 2.5, True, "p" * 200)},
            }
            store.add(span(i, trace=i // 4 + 1, attrs=attrs))

    real, store = _traced(fill)
    assert 0.77 <= real / store.open_bytes <= 1.3, (real, store.open_bytes)


def test_a_stream_of_keyless_traces_stays_within_bounded_memory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A trace judged alone is remembered, so that a late span of it joins it, up to a bound on
    # the traces remembered; lowered here so that a short stream outruns it.
    monkeypatch.setattr(store_module, "_MAX_TRACE_KEYS", 400)
    kept: list[SessionStore] = []

    def stream(traces: int) -> Callable[[], None]:
        def work() -> None:
            clock = Clock()
            store = SessionStore(
                ClosePolicy(idle_timeout_s=1, keep_closed_sessions=0, keep_closed_revisions=10),
                clock=clock,
            )
            kept.append(store)
            for i in range(1, traces + 1):  # no session key: each trace is its own session
                store.add(span(i, trace=i, attrs={"gen_ai.operation.name": "chat"}))
                clock.now += 2
                assert len(store.close()) == 1  # judged alone

        return work

    short, long = bytes_kept(stream(2_000)), bytes_kept(stream(8_000))
    assert long < 1.5 * short + 50_000, (short, long)
