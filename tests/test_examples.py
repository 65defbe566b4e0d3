"""The shipped examples work exactly as shipped: examples/spanjudge.yaml (in process),
collector-config/spanjudge-serve.yaml (beside the Collector configuration it pairs with) and the
plain OpenTelemetry example agent, which prints a short verdict summary."""

from __future__ import annotations

import os
import subprocess
import sys

import yaml

from spanjudge.config import load_config
from spanjudge.sidecar import serve_config
from tests.collector.collector_graph import resolve_env
from tests.conftest import ROOT

EXAMPLES = ROOT / "examples"
COLLECTOR = ROOT / "collector-config"


def test_the_in_process_example_configuration_loads_as_shipped() -> None:
    config = load_config(str(EXAMPLES / "spanjudge.yaml"))
    assert config.policy.idle_timeout_s == 900.0 and config.policy.max_age_s == 6 * 3600.0
    assert [e.pattern for e in config.entries] == ["plain-otel-*", "demo-incident"]
    assert config.label_skills == ("csv-report", "incident-triage")


def test_the_serve_example_pairs_with_the_collector_configuration() -> None:
    serve = serve_config(load_config(str(COLLECTOR / "spanjudge-serve.yaml")))
    collector = yaml.safe_load((COLLECTOR / "sidecar.yaml").read_text())
    # The Collector exports agent traces where serve listens ...
    # (addresses are `${env:NAME:-default}`: the defaults are what pairs)
    spanjudge = collector["exporters"]["otlp_grpc/spanjudge"]["endpoint"]
    assert resolve_env(spanjudge) == serve.grpc_endpoint
    # ... and serve sends verdicts to the Collector's separate verdict receiver.
    verdicts = resolve_env(
        collector["receivers"]["otlp/spanjudge_verdicts"]["protocols"]["grpc"]["endpoint"]
    )
    assert serve.export.enabled and serve.export.endpoint == f"http://{verdicts}"
    assert serve.export.protocol == "grpc" and serve.export.insecure is True
    assert (serve.export.timeout_s, serve.shutdown_timeout_s) == (10.0, 20.0)


def test_plain_otel_agent_prints_its_verdicts_with_no_collector() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "SPANJUDGE_"))}
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "plain_otel_agent.py")],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "agent: The grand total is 2500.\n"
    # One line for the one session, from spanjudge's console sink, and nothing else.
    [line] = done.stderr.splitlines()
    assert line.startswith("spanjudge: session plain-otel-1: "), line
    outcomes = dict(part.split("=") for part in line.split(": ", 2)[2].split(" -- ")[0].split())
    assert outcomes["skill_loaded"] == "PASS" and outcomes["outcome"] == "PASS"
    assert len(outcomes) == 10 and "FAIL" not in outcomes.values()
