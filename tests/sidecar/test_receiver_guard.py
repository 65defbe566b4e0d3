"""The receivers' last-resort handler is the one internal-error guard: a bug while handling a
request is answered (never a dead receiver thread), counted, logged once, and re-raised under the
test suite so it cannot hide behind the answer."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import pytest

from spanjudge.guard import contained
from spanjudge.sidecar.config import InputConfig
from spanjudge.sidecar.handling import Handler
from spanjudge.spans.limits import Limits


def _broken_handler(monkeypatch: pytest.MonkeyPatch) -> Handler:
    handler = Handler(
        SimpleNamespace(telemetry=None),  # type: ignore[arg-type]
        limits=Limits(),
        checks=InputConfig(),
        token=None,
    )

    def boom(body: bytes, fmt: str) -> Any:
        raise RuntimeError("bug in request handling")

    monkeypatch.setattr(handler, "_handle", boom)
    return handler


def test_a_bug_is_answered_counted_and_logged_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    handler = _broken_handler(monkeypatch)
    with contained(), caplog.at_level(logging.ERROR, logger="spanjudge.sidecar"):
        answers = [handler.handle(b"{}", "json", "http") for _ in range(3)]
    assert {a.result for a in answers} == {"unavailable"}
    assert "bug in request handling" in (answers[0].message or "")
    assert handler.guard.errors == 3
    assert handler.counts == {"unavailable": 3}
    assert len([r for r in caplog.records if "handling an export request" in r.getMessage()]) == 1


def test_under_the_test_suite_the_bug_is_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    handler = _broken_handler(monkeypatch)
    with pytest.raises(RuntimeError, match="bug in request handling"):
        handler.handle(b"{}", "json", "http")
