"""A real Prometheus server (Debian's `/usr/bin/prometheus`) on a free port, for tests."""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import unavailable

PROMETHEUS = "/usr/bin/prometheus"


def require_prometheus() -> None:
    if shutil.which(PROMETHEUS) is None:
        unavailable("prometheus", f"{PROMETHEUS} is not installed (Debian package `prometheus`)")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


def query(base: str, expr: str) -> list[dict[str, Any]]:
    """The instant query's result vector."""
    answer = get(f"{base}/api/v1/query?query={urllib.parse.quote(expr)}")
    assert answer["status"] == "success", answer
    result: list[dict[str, Any]] = answer["data"]["result"]
    return result


@contextlib.contextmanager
def running_prometheus(directory: Path, config: str) -> Iterator[str]:
    """Prometheus with ``config`` (prometheus.yml text; relative rule files are found in
    ``directory``), ready to answer; yields its base URL and stops it afterwards."""
    config_path = directory / "prometheus.yml"
    config_path.write_text(config, encoding="utf-8")
    port = free_port()
    log_path = directory / "prometheus.log"
    log = log_path.open("w")
    proc = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={config_path}",
            f"--storage.tsdb.path={directory / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{base}/-/ready", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                log.flush()
                pytest.fail("prometheus did not start:\n" + log_path.read_text())
            time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        log.close()
