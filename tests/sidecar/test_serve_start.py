"""`spanjudge serve` start-up: where its configuration comes from, and every busy port named."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml


def _serve(tmp_path: Path, serve: dict[str, Any], *argv: str, **env: str) -> str:
    """Run `spanjudge serve` to its exit (a refused start); returns its stderr."""
    section = {
        "grpc_endpoint": "127.0.0.1:0",
        "http_endpoint": "127.0.0.1:0",
        "metrics_endpoint": None,
        "workers": 1,
        "spool": {"path": str(tmp_path / "spool.db")},
        **serve,
    }
    config = tmp_path / "spanjudge.yaml"
    config.write_text(yaml.safe_dump({"serve": section}))
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "SPANJUDGE_"))}
    done = subprocess.run(
        [sys.executable, "-m", "spanjudge", "serve", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        env={**clean, **{k: v.replace("{config}", str(config)) for k, v in env.items()}},
    )
    assert done.returncode == 2, done.stderr
    return done.stderr


@pytest.fixture
def busy() -> Iterator[list[int]]:
    listeners = [socket.socket(), socket.socket()]
    for listener in listeners:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
    yield [listener.getsockname()[1] for listener in listeners]
    for listener in listeners:
        listener.close()


def test_both_busy_receiver_ports_are_reported(tmp_path: Path, busy: list[int]) -> None:
    grpc, http = busy
    stderr = _serve(
        tmp_path,
        {"grpc_endpoint": f"127.0.0.1:{grpc}", "http_endpoint": f"127.0.0.1:{http}"},
        "--config",
        str(tmp_path / "spanjudge.yaml"),
    )
    assert f"serve.grpc_endpoint 127.0.0.1:{grpc}: address already in use" in stderr
    assert f"serve.http_endpoint 127.0.0.1:{http}: address already in use" in stderr
    assert "Traceback" not in stderr


def test_spanjudge_config_is_read_when_there_is_no_config_flag(
    tmp_path: Path, busy: list[int]
) -> None:
    port = busy[0]
    stderr = _serve(tmp_path, {"http_endpoint": f"127.0.0.1:{port}"}, SPANJUDGE_CONFIG="{config}")
    assert f"serve.http_endpoint 127.0.0.1:{port}: address already in use" in stderr
    assert f"invalid configuration in {tmp_path / 'spanjudge.yaml'}" in stderr
