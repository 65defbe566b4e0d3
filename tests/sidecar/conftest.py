"""An in-process sidecar on free ports, export off, spool in the test's directory."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from spanjudge.config import parse_config
from spanjudge.sidecar.config import parse_serve
from spanjudge.sidecar.server import Sidecar
from tests.sidecar.helpers import VerdictServer

MakeSidecar = Callable[..., Sidecar]


@pytest.fixture
def make_sidecar(tmp_path: Path) -> Iterator[MakeSidecar]:
    started: list[Sidecar] = []

    def make(sessions: dict[str, Any] | None = None, **serve: Any) -> Sidecar:
        raw = {
            "grpc_endpoint": "127.0.0.1:0",
            "http_endpoint": "127.0.0.1:0",
            "metrics_endpoint": None,
            "tick_interval_s": 0.05,
            # in this process: tests look into the worker's store
            "workers": 1,
            "export": {"enabled": False},
            "spool": {"path": str(tmp_path / f"spool{len(started)}.db")},
        }
        for key, value in serve.items():
            if isinstance(value, dict) and isinstance(raw.get(key), dict):
                raw[key] = {**raw[key], **value}
            else:
                raw[key] = value
        problems: list[str] = []
        config = parse_serve(raw, "serve", problems)
        assert not problems
        sidecar = Sidecar(parse_config({"sessions": sessions or {"idle_timeout_s": 60}}), config)
        sidecar.start()
        started.append(sidecar)
        return sidecar

    yield make
    for sidecar in started:
        sidecar.stop()


@pytest.fixture
def verdicts() -> Iterator[VerdictServer]:
    """A real OTLP receiver for the verdicts a sidecar exports (stopped after the test)."""
    server = VerdictServer()
    yield server
    server.stop()
