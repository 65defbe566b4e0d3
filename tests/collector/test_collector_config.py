"""collector-config/*.yaml: they parse, agree with spanjudge's defaults, and never loop verdicts."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from spanjudge import semconv
from spanjudge.sidecar.config import (
    DEFAULT_GRPC_ENDPOINT,
    DEFAULT_HTTP_ENDPOINT,
    DEFAULT_METRICS_ENDPOINT,
)
from tests.collector.collector_graph import (
    COLLECTOR_FILES,
    CONFIG_DIR,
    component_type,
    exporter_targets,
    load,
    pipelines,
    port_of,
    reachable_exporters,
    receiver_endpoints,
    resolve_env,
)

SPANJUDGE_PORTS = {port_of(DEFAULT_GRPC_ENDPOINT), port_of(DEFAULT_HTTP_ENDPOINT)}
# Where spanjudge's verdicts come back to the Collector. spanjudge has no default for this (it
# reads OTEL_EXPORTER_OTLP_*); these ports are the ones collector-config/README.md tells the
# operator to set, and they must differ from the agents' 4317/4318.
VERDICT_PORTS = {14317, 14318}
AGENT_PORTS = {4317, 4318}

# Current component type names (collector v1.50+/contrib v0.153+); the deprecated aliases are
# accepted by newer Collectors but must not appear in files an operator copies today.
CURRENT = {
    "receivers": {"otlp"},
    "processors": {"memory_limiter", "batch"},
    "exporters": {
        "otlp_grpc",
        "otlp_http",
        "prometheus_remote_write",
        "prometheus",
        "load_balancing",
    },
    "connectors": set(),
    "extensions": set(),
}
DEPRECATED = {"otlphttp", "prometheusremotewrite", "loadbalancing"}


def _components(config: dict[str, Any], kind: str) -> dict[str, Any]:
    return dict(config.get(kind) or {})


@pytest.fixture(params=COLLECTOR_FILES)
def config(request: pytest.FixtureRequest) -> dict[str, Any]:
    return load(request.param)


def test_pipelines_reference_only_defined_components(config: dict[str, Any]) -> None:
    assert pipelines(config), "no pipelines"
    for pipe in pipelines(config):
        assert pipe.receivers and pipe.exporters, pipe.name
        for kind, ids in (
            ("receivers", pipe.receivers),
            ("processors", pipe.processors),
            ("exporters", pipe.exporters),
        ):
            defined = _components(config, kind) | _components(config, "connectors")
            missing = [cid for cid in ids if cid not in defined]
            assert not missing, f"{pipe.name}: undefined {kind} {missing}"


def test_component_names_are_current(config: dict[str, Any]) -> None:
    for kind, allowed in CURRENT.items():
        for cid in _components(config, kind):
            ctype = component_type(cid)
            assert ctype not in DEPRECATED, f"{cid}: deprecated alias, use the current name"
            assert ctype in allowed, f"{cid}: unexpected {kind[:-1]} type {ctype!r}"
    # The OTLP gRPC exporter's deprecated alias is `otlp`, which is also the receiver's name.
    assert not [e for e in _components(config, "exporters") if component_type(e) == "otlp"]


def test_every_pipeline_limits_memory_first(config: dict[str, Any]) -> None:
    for pipe in pipelines(config):
        assert pipe.processors[:1] == ("memory_limiter",), pipe.name


def test_sidecar_exporters_use_spanjudge_default_endpoints() -> None:
    exporters = load("sidecar.yaml")["exporters"]
    grpc = resolve_env(exporters["otlp_grpc/spanjudge"]["endpoint"])
    assert grpc == DEFAULT_GRPC_ENDPOINT
    assert (
        resolve_env(exporters["otlp_http/spanjudge"]["endpoint"])
        == f"http://{DEFAULT_HTTP_ENDPOINT}"
    )


def test_scale_out_balances_sessions_across_spanjudge_grpc_port() -> None:
    config = load("scale-out.yaml")
    balancer = config["exporters"]["load_balancing/spanjudge"]
    assert balancer["routing_key"] == "attributes"
    assert balancer["routing_attributes"] == [semconv.SESSION_ID]
    port = resolve_env(str(balancer["resolver"]["dns"]["port"]))
    assert port == str(port_of(DEFAULT_GRPC_ENDPOINT))
    # The GenAI variant is documented next to it.
    text = (CONFIG_DIR / "scale-out.yaml").read_text(encoding="utf-8")
    assert f"routing_attributes: [{semconv.GEN_AI_CONVERSATION_ID}]" in text
    assert "k8s:" in text


def test_sidecar_collector_ports_do_not_collide_with_spanjudge() -> None:
    # Collector and spanjudge share the host in sidecar.yaml: no port may be bound twice.
    config = load("sidecar.yaml")
    bound = [port_of(endpoint) for _, endpoint in receiver_endpoints(config)]
    bound.append(port_of(config["exporters"]["prometheus"]["endpoint"]))
    reader = config["service"]["telemetry"]["metrics"]["readers"][0]["pull"]["exporter"]
    bound.append(int(resolve_env(str(reader["prometheus"]["port"]))))
    spanjudge = {*SPANJUDGE_PORTS, port_of(DEFAULT_METRICS_ENDPOINT)}
    assert len(bound) == len(set(bound)), f"a port is bound twice: {sorted(bound)}"
    assert not spanjudge & set(bound), f"Collector binds spanjudge's ports {spanjudge & set(bound)}"


def _verdict_receivers(config: dict[str, Any]) -> set[str]:
    return {rid for rid, ep in receiver_endpoints(config) if port_of(ep) in VERDICT_PORTS}


def _agent_receivers(config: dict[str, Any]) -> set[str]:
    return {rid for rid, ep in receiver_endpoints(config) if port_of(ep) in AGENT_PORTS}


def _spanjudge_inputs(config: dict[str, Any]) -> set[str]:
    return {
        eid
        for eid in _components(config, "exporters")
        if any(port in SPANJUDGE_PORTS for _, port in exporter_targets(config, eid))
    }


def _feedback(config: dict[str, Any]) -> set[str]:
    return reachable_exporters(config, _verdict_receivers(config)) & _spanjudge_inputs(config)


def test_verdicts_arrive_on_a_receiver_of_their_own(config: dict[str, Any]) -> None:
    verdicts, agents = _verdict_receivers(config), _agent_receivers(config)
    assert verdicts and agents
    assert not verdicts & agents, "verdicts and agent spans share a receiver"
    # Every verdict signal (evaluation spans, log events, metrics) has a way out.
    signals = {p.name.split("/")[0] for p in pipelines(config) if verdicts & set(p.receivers)}
    assert signals == {"traces", "logs", "metrics"}


def test_agent_spans_reach_spanjudge(config: dict[str, Any]) -> None:
    # Without this the no-feedback check below would pass vacuously.
    reached = reachable_exporters(config, _agent_receivers(config)) & _spanjudge_inputs(config)
    assert reached, "agent spans never reach spanjudge"


def test_no_pipeline_feeds_spanjudge_output_back(config: dict[str, Any]) -> None:
    assert not _feedback(config)


def test_feedback_check_sees_a_direct_loop() -> None:
    config = copy.deepcopy(load("sidecar.yaml"))
    config["service"]["pipelines"]["traces/verdicts"]["exporters"].append("otlp_grpc/spanjudge")
    assert _feedback(config) == {"otlp_grpc/spanjudge"}


def test_feedback_check_follows_connectors() -> None:
    config = copy.deepcopy(load("scale-out.yaml"))
    config["connectors"] = {"forward/again": {}}
    pipes = config["service"]["pipelines"]
    pipes["traces/verdicts"]["exporters"].append("forward/again")
    pipes["traces/again"] = {
        "receivers": ["forward/again"],
        "processors": ["memory_limiter"],
        "exporters": ["load_balancing/spanjudge"],
    }
    assert _feedback(config) == {"load_balancing/spanjudge"}
