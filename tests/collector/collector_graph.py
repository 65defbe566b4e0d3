"""The Collector configurations in collector-config/ as data: components, endpoints, graph."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

CONFIG_DIR = Path(__file__).resolve().parents[2] / "collector-config"
COLLECTOR_FILES = ("sidecar.yaml", "scale-out.yaml")

# `${env:NAME:-default}` (confmap env provider) resolves to its default when NAME is unset.
_ENV = re.compile(r"\$\{env:[A-Za-z_][A-Za-z0-9_]*(?::-([^}]*))?\}")


def load(name: str) -> dict[str, Any]:
    """One Collector configuration file, parsed."""
    doc = yaml.safe_load((CONFIG_DIR / name).read_text(encoding="utf-8"))
    assert isinstance(doc, dict), name
    return doc


def resolve_env(value: str) -> str:
    """The value the Collector sees with no environment variables set."""
    return _ENV.sub(lambda m: m[1] or "", value)


def component_type(component_id: str) -> str:
    """``otlp_grpc/spanjudge`` -> ``otlp_grpc``."""
    return component_id.split("/", 1)[0]


def port_of(endpoint: str) -> int:
    """Port of ``host:port`` or ``scheme://host:port/path``."""
    hostport = resolve_env(endpoint).split("://", 1)[-1].split("/", 1)[0]
    return int(hostport.rpartition(":")[2])


def host_of(endpoint: str) -> str:
    hostport = resolve_env(endpoint).split("://", 1)[-1].split("/", 1)[0]
    return hostport.rpartition(":")[0]


def receiver_endpoints(config: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(receiver id, endpoint) for every listening address of every receiver."""
    for rid, body in (config.get("receivers") or {}).items():
        for proto in ((body or {}).get("protocols") or {}).values():
            if proto and "endpoint" in proto:
                yield rid, str(proto["endpoint"])


def exporter_targets(config: dict[str, Any], exporter_id: str) -> list[tuple[str, int]]:
    """(host, port) pairs an exporter sends to; a load balancer sends to its resolver's port."""
    body = (config.get("exporters") or {}).get(exporter_id) or {}
    if "endpoint" in body:
        endpoint = str(body["endpoint"])
        return [(host_of(endpoint), port_of(endpoint))]
    resolver = body.get("resolver") or {}
    targets: list[tuple[str, int]] = []
    if "dns" in resolver:
        dns = resolver["dns"]
        targets.append((resolve_env(dns["hostname"]), int(resolve_env(str(dns["port"])))))
    if "k8s" in resolver:
        targets += [(resolver["k8s"]["service"], int(p)) for p in resolver["k8s"]["ports"]]
    if "static" in resolver:
        targets += [
            (h.rpartition(":")[0], int(h.rpartition(":")[2]))
            for h in resolver["static"]["hostnames"]
        ]
    return targets


@dataclass(frozen=True, slots=True, kw_only=True)
class Pipeline:
    """One service pipeline: where data enters and where it leaves."""

    name: str
    receivers: tuple[str, ...]
    processors: tuple[str, ...]
    exporters: tuple[str, ...]


def pipelines(config: dict[str, Any]) -> list[Pipeline]:
    return [
        Pipeline(
            name=name,
            receivers=tuple(body.get("receivers") or ()),
            processors=tuple(body.get("processors") or ()),
            exporters=tuple(body.get("exporters") or ()),
        )
        for name, body in ((config.get("service") or {}).get("pipelines") or {}).items()
    ]


def reachable_exporters(config: dict[str, Any], start_receivers: set[str]) -> set[str]:
    """Every exporter that data entering ``start_receivers`` can reach.

    Walks pipelines transitively: a connector is an exporter in one pipeline and a receiver in
    another, so data leaving through it enters the pipelines that list it as a receiver.
    """
    connectors = set((config.get("connectors") or {}).keys())
    frontier = set(start_receivers)
    seen_receivers: set[str] = set()
    reached: set[str] = set()
    while frontier:
        receiver = frontier.pop()
        seen_receivers.add(receiver)
        for pipe in pipelines(config):
            if receiver not in pipe.receivers:
                continue
            for exporter in pipe.exporters:
                reached.add(exporter)
                if exporter in connectors and exporter not in seen_receivers:
                    frontier.add(exporter)
    return reached
