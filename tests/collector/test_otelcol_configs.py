"""Every Collector config in collector-config/ is accepted and run by a real Collector.

`otelcol validate` builds each component's configuration (so a misspelt component or option
fails here), and then the file itself is started with its listening addresses moved to free
loopback ports through the environment variables it reads.
"""

from __future__ import annotations

import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.collector.collector_graph import COLLECTOR_FILES
from tests.collector.otelcol import (
    CONFIG_DIR,
    Collector,
    loopback_env,
    otelcol_binary,
    validate,
    wait_for,
)

pytestmark = pytest.mark.slow


def _is_collector_config(path: Path) -> bool:
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    return isinstance(doc, dict) and "pipelines" in (doc.get("service") or {})


def test_every_collector_config_is_listed() -> None:
    # The other tests walk COLLECTOR_FILES: a new Collector config must join that list.
    found = {p.name for p in CONFIG_DIR.glob("*.yaml") if _is_collector_config(p)}
    assert found == set(COLLECTOR_FILES)


def _components(binary: str) -> dict[str, set[str]]:
    out = subprocess.run([binary, "components"], capture_output=True, text=True, check=True)
    doc: dict[str, Any] = yaml.safe_load(out.stdout)
    return {
        kind: {c["name"] for c in doc.get(kind) or []}
        for kind in ("receivers", "processors", "exporters")
    }


def test_the_built_collector_has_every_component_the_configs_name() -> None:
    built = _components(otelcol_binary())
    for name in COLLECTOR_FILES:
        doc = yaml.safe_load((CONFIG_DIR / name).read_text(encoding="utf-8"))
        for kind in built:
            for component_id in doc.get(kind) or {}:
                assert component_id.split("/")[0] in built[kind], f"{name}: {component_id}"


@pytest.mark.parametrize("name", COLLECTOR_FILES)
def test_config_validates(name: str) -> None:
    result = validate(CONFIG_DIR / name)
    assert result.returncode == 0, result.stderr + result.stdout


def test_validate_rejects_a_wrong_option(tmp_path: Path) -> None:
    # Without this, a validate that accepts anything would pass the test above.
    doc = yaml.safe_load((CONFIG_DIR / "sidecar.yaml").read_text(encoding="utf-8"))
    doc["exporters"]["otlp_grpc/spanjudge"]["retry_on_failure"]["max_elapsed"] = "1m"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(doc), encoding="utf-8")
    result = validate(bad)
    assert result.returncode != 0
    assert "max_elapsed" in result.stderr + result.stdout


@pytest.mark.parametrize("name", COLLECTOR_FILES)
def test_config_runs_on_loopback(name: str, tmp_path: Path) -> None:
    env = loopback_env()
    # Backends and spanjudge: addresses where nothing listens; the exporters only queue.
    env |= {
        "TEMPO_OTLP_GRPC_ENDPOINT": "127.0.0.1:9",
        "LOKI_OTLP_ENDPOINT": "http://127.0.0.1:9/otlp",
        "PROMETHEUS_REMOTE_WRITE_URL": "http://127.0.0.1:9/api/v1/write",
        "SPANJUDGE_OTLP_GRPC_ENDPOINT": "127.0.0.1:9",
        "SPANJUDGE_OTLP_HTTP_ENDPOINT": "http://127.0.0.1:9",
        "SPANJUDGE_HEADLESS_SERVICE": "localhost",
        "SPANJUDGE_OTLP_GRPC_PORT": "9",
    }
    collector = Collector(tmp_path, CONFIG_DIR / name, env).start()
    try:
        url = f"http://127.0.0.1:{env['OTELCOL_TELEMETRY_PORT']}/metrics"

        def telemetry() -> bool:
            try:
                with urllib.request.urlopen(url, timeout=2) as answer:
                    return b"otelcol_" in answer.read()
            except OSError:
                return False

        # Its own metrics answer on the port the environment gave it.
        assert wait_for(telemetry, 30), collector.log()
    finally:
        assert collector.stop() == 0, collector.log()
    # The configs use the current component names: no deprecated-alias warning.
    assert "deprecated" not in collector.log().lower(), collector.log()
