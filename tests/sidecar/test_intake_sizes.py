"""The span sizes the JSON intake's fast road works out go with the spans to the session store
(which would otherwise estimate every span again): they must be the store's own estimates, one
per span accepted, also when spans of a request are rejected or are spanjudge's own."""

from __future__ import annotations

import json

import pytest

from spanjudge.config import parse_config
from spanjudge.engine import Engine
from spanjudge.sessions.store import ClosePolicy
from spanjudge.sidecar import intake
from spanjudge.sidecar.config import InputConfig, parse_serve
from spanjudge.sidecar.intake import FORMAT_JSON, decode_body
from spanjudge.sidecar.routing import Router
from spanjudge.sidecar.server import Sidecar
from spanjudge.spans.limits import DEFAULT_LIMITS
from spanjudge.spans.sizes import estimate_size
from tests.sidecar.helpers import FIXTURES


def _lines() -> list[bytes]:
    return [
        line.encode()
        for path in sorted(FIXTURES.glob("*/*.jsonl"))
        for line in path.read_text().splitlines()
        if line.strip()
    ]


def test_every_fixture_request_carries_the_stores_estimates() -> None:
    with_sizes = 0
    for body in _lines():
        decoded = decode_body(body, FORMAT_JSON, DEFAULT_LIMITS, InputConfig())
        if decoded.sizes is not None:
            with_sizes += 1
            assert decoded.sizes == [estimate_size(r) for r in decoded.records]
    assert with_sizes > 100  # the fast road took them (else nothing here was checked)


def test_a_rejected_span_leaves_no_size_out_of_step() -> None:
    doc = json.loads(_lines()[0])
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert len(spans) > 1
    spans[0]["startTimeUnixNano"] = "5"  # not plausible: rejected
    decoded = decode_body(json.dumps(doc).encode(), FORMAT_JSON, DEFAULT_LIMITS, InputConfig())
    assert len(decoded.problems) == 1 and decoded.records
    assert decoded.sizes is None or decoded.sizes == [estimate_size(r) for r in decoded.records]


def _fed(monkeypatch: pytest.MonkeyPatch, fast_road: bool) -> Sidecar:
    """A sidecar (one process, not started) whose worker took every fixture request."""
    problems: list[str] = []
    serve = parse_serve(
        {
            "grpc_endpoint": None,
            "http_endpoint": None,
            "metrics_endpoint": None,
            "workers": 1,
            "export": {"enabled": False},
            "spool": {"enabled": False},
        },
        "serve",
        problems,
    )
    assert not problems
    config = parse_config({"sessions": {"idle_timeout_s": 600}})
    # an engine of its own: the test process's global meter provider stays as it is
    sidecar = Sidecar(config, serve, engine=Engine(config))
    with monkeypatch.context() as patch:
        if not fast_road:  # the general road: the same records, no sizes
            patch.setattr(intake, "decode_fast", lambda data, limits, sizes=None: None)
        for body in _lines():
            assert sidecar.handler._handle(body, FORMAT_JSON).result in ("ok", "partial")
    worker = sidecar.worker
    while not worker._queue.empty():
        worker._add(worker._queue.get_nowait())
    return sidecar


def test_the_store_accounts_the_same_bytes_with_the_decoders_sizes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fast, general = (_fed(monkeypatch, road).worker.store for road in (True, False))
    assert fast.open_bytes == general.open_bytes > 0
    assert fast.pending_bytes == general.pending_bytes
    assert {k: s.size_bytes for k, s in fast.open.items()} == {
        k: s.size_bytes for k, s in general.open.items()
    }


def test_each_evaluation_process_gets_the_sizes_of_the_spans_routed_to_it() -> None:
    """`serve.workers` > 1: a request's spans are split between the processes, key-less ones
    wait and may move to their key's owner later; each part's sizes are its spans' own."""
    router = Router(3, ClosePolicy().key_attributes, hold_s=600)
    parts = moved = 0
    for body in _lines():  # spans of one trace in several requests, keys arriving late
        decoded = decode_body(body, FORMAT_JSON, DEFAULT_LIMITS, InputConfig())
        for index in range(0, len(decoded.records), 3):
            records = decoded.records[index : index + 3]
            sizes = [estimate_size(r) for r in records]
            for routed in router.route(records, sizes).values():
                parts += 1
                if routed.sizes is not None:
                    assert routed.sizes == [estimate_size(r) for r in routed.records]
                else:
                    moved += 1
    assert parts > 100 and moved > 0  # spans that waited for their key moved, unsized
