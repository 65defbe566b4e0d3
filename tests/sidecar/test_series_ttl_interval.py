"""`labels.series_ttl` below the OTLP metric export interval would lose the updates a series
got between two exports once it expires: `spanjudge serve` refuses it, naming both values."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.sidecar.helpers import SidecarProcess

pytestmark = pytest.mark.slow


def _serve(tmp_path: Path, labels: dict[str, Any], export: dict[str, Any]) -> Any:
    config = tmp_path / "spanjudge.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "labels": labels,
                "serve": {
                    "grpc_endpoint": "127.0.0.1:0",
                    "http_endpoint": None,
                    "metrics_endpoint": None,
                    "workers": 1,
                    "spool": {"path": str(tmp_path / "spool.db")},
                    "export": export,
                },
            }
        )
    )
    return subprocess.run(
        [sys.executable, "-m", "spanjudge.sidecar", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_series_ttl_below_the_metric_export_interval_is_refused(tmp_path: Path) -> None:
    done = _serve(
        tmp_path,
        {"series_ttl": "5s"},
        {"endpoint": "http://127.0.0.1:9", "insecure": True, "metrics_interval": "10s"},
    )
    assert done.returncode == 2
    assert "labels.series_ttl (5s) is below serve.export.metrics_interval (10s)" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "spool.db").exists()  # nothing was started


def test_a_series_ttl_of_the_interval_or_zero_starts(tmp_path: Path) -> None:
    for ttl in ("10s", "0s"):
        tmp = tmp_path / ttl
        tmp.mkdir()
        config = {
            "labels": {"series_ttl": ttl},
            "serve": {
                "grpc_endpoint": "127.0.0.1:0",
                "http_endpoint": None,
                "metrics_endpoint": None,
                "workers": 1,
                "spool": {"path": str(tmp / "spool.db")},
                # the stop is not under test: no waiting out the default deadline for a
                # metrics flush that cannot reach port 9
                "shutdown_timeout_s": 2,
                "export": {
                    "endpoint": "http://127.0.0.1:9",
                    "insecure": True,
                    "metrics_interval": "10s",
                },
            },
        }
        sidecar = SidecarProcess(tmp, config).start()
        assert sidecar.terminate() == 0
