"""`spanjudge serve` refuses a configuration it cannot run with: exit 2, one message naming the
setting, the value and the fix, and no traceback (busy ports, unusable spool files)."""

from __future__ import annotations

import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from spanjudge.config import parse_config
from spanjudge.errors import ConfigError
from spanjudge.sidecar.config import parse_serve
from spanjudge.sidecar.server import Sidecar

pytestmark = pytest.mark.slow


def serve(tmp_path: Path, **settings: Any) -> subprocess.CompletedProcess[str]:
    """Run `spanjudge serve` to completion (it must exit by itself)."""
    serve_section: dict[str, Any] = {
        "grpc_endpoint": "127.0.0.1:0",
        "http_endpoint": "127.0.0.1:0",
        "metrics_endpoint": None,
        "spool": {"path": str(tmp_path / "spool.db")},
        **settings,
    }
    config = tmp_path / "spanjudge.yaml"
    config.write_text(yaml.safe_dump({"serve": serve_section}))
    return subprocess.run(
        [sys.executable, "-m", "spanjudge.sidecar", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield listener.getsockname()[1]


@pytest.mark.parametrize("setting", ["http_endpoint", "grpc_endpoint", "metrics_endpoint"])
def test_busy_port_is_a_configuration_error_naming_the_setting(
    tmp_path: Path, busy_port: int, setting: str
) -> None:
    result = serve(tmp_path, **{setting: f"127.0.0.1:{busy_port}"})
    assert result.returncode == 2, result.stderr
    assert f"serve.{setting} 127.0.0.1:{busy_port}: address already in use" in result.stderr
    assert "port 0 picks a free one" in result.stderr
    assert "Traceback" not in result.stderr
    assert "Errno" not in result.stderr
    assert "Failed to add port" not in result.stderr  # no gRPC C-core noise either


def test_spool_in_a_missing_directory(tmp_path: Path) -> None:
    path = tmp_path / "no" / "such" / "spool.db"
    result = serve(tmp_path, spool={"path": str(path)})
    assert result.returncode == 2, result.stderr
    assert "serve.spool.path" in result.stderr
    assert f"directory '{path.parent}' does not exist" in result.stderr
    assert "create it" in result.stderr
    assert "Traceback" not in result.stderr
    assert not path.parent.exists()
    # checked when serving, not when loading: the same file is validated on other machines
    problems: list[str] = []
    parse_serve({"spool": {"path": str(path)}}, "serve", problems)
    assert problems == []


def test_spool_path_holding_another_file(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("not a database\n" * 100)
    result = serve(tmp_path, spool={"path": str(path)})
    assert result.returncode == 2, result.stderr
    assert f"serve.spool.path: '{path}' is not a spanjudge spool" in result.stderr
    assert "move that file away or choose another path" in result.stderr
    assert "Traceback" not in result.stderr
    assert path.read_text() == "not a database\n" * 100  # left as it was


def test_spool_that_fails_only_when_opened(tmp_path: Path) -> None:
    # A SQLite header with garbage after it passes the check at load, then SQLite refuses it.
    path = tmp_path / "spool.db"
    path.write_bytes(b"SQLite format 3\x00" + b"\xff" * 4096)
    problems: list[str] = []
    serve_config = parse_serve(
        {
            "grpc_endpoint": None,
            "http_endpoint": None,
            "metrics_endpoint": None,
            "spool": {"path": str(path)},
        },
        "serve",
        problems,
    )
    assert problems == []
    with pytest.raises(ConfigError) as raised:
        Sidecar(parse_config({}), serve_config)
    [problem] = raised.value.problems
    assert problem.startswith(f"serve.spool.path: the spool '{path}' is damaged (")
    assert "set serve.spool.recreate: true to move it aside" in problem
    with pytest.raises(sqlite3.DatabaseError):  # the file really is unusable, and untouched
        sqlite3.connect(path).execute("SELECT * FROM sqlite_master").fetchall()
    result = serve(tmp_path, spool={"path": str(path)})
    assert result.returncode == 2, result.stderr
    assert f"serve.spool.path: the spool '{path}' is damaged" in result.stderr
    assert "Traceback" not in result.stderr
