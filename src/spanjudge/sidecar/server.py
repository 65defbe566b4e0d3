"""`Sidecar`: wires receivers, spool, worker, sinks and exporters together, and takes them apart
again in order on shutdown."""

from __future__ import annotations

import logging
import os
import socket
import time
from dataclasses import dataclass
from typing import Any

from opentelemetry import metrics
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.resources import Resource

from spanjudge.config import Config
from spanjudge.emit.base import Sink
from spanjudge.emit.metrics import MetricsSink, SelfTelemetry, score_views
from spanjudge.emit.otel import OtelVerdictSink
from spanjudge.engine import Engine
from spanjudge.sidecar.config import ServeConfig
from spanjudge.sidecar.export import build_metric_readers, build_verdict_export
from spanjudge.sidecar.grpc_receiver import GrpcReceiver
from spanjudge.sidecar.handling import Handler, SidecarTelemetry
from spanjudge.sidecar.http_receiver import HttpReceiver
from spanjudge.sidecar.spool import MemorySpool, Spool
from spanjudge.sidecar.worker import Worker

log = logging.getLogger("spanjudge.sidecar")


def _adopt_as_global(provider: MeterProvider) -> None:
    """Make ``provider`` the global one unless an SDK provider is already installed."""
    if not isinstance(metrics.get_meter_provider(), MeterProvider):
        metrics.set_meter_provider(provider)


@dataclass(frozen=True, slots=True, kw_only=True)
class Endpoints:
    """Where the started sidecar listens (ports resolved when 0 was configured)."""

    grpc: str | None
    http: str | None
    metrics: str | None

    def to_json(self) -> dict[str, Any]:
        return {"grpc": self.grpc, "http": self.http, "metrics": self.metrics, "pid": os.getpid()}


def _host(endpoint: str) -> str:
    return endpoint.rpartition(":")[0]


def _start_prometheus(endpoint: str) -> tuple[Any, Any, int]:
    from opentelemetry.exporter.prometheus import PrometheusMetricReader
    from prometheus_client import start_http_server

    reader = PrometheusMetricReader()
    host, _, port = endpoint.rpartition(":")
    server, _thread = start_http_server(int(port), addr=host.strip("[]"))
    return reader, server, int(server.server_port)


class Sidecar:
    """`spanjudge serve` as an object: `start()` binds everything, `stop()` drains it."""

    def __init__(self, config: Config, serve: ServeConfig, *, engine: Engine | None = None) -> None:
        self.config = config
        self.serve = serve
        self.endpoints: Endpoints | None = None
        self._prometheus_server: Any = None
        self._started = False
        self._stopped = False
        attributes = {"service.name": os.environ.get("OTEL_SERVICE_NAME", "spanjudge")}
        if "service.instance.id" not in os.environ.get("OTEL_RESOURCE_ATTRIBUTES", ""):
            # Replicas must not overwrite each other's series after remote write.
            attributes["service.instance.id"] = f"{socket.gethostname()}-{os.getpid()}"
        resource = Resource.create(attributes)
        readers = build_metric_readers(serve.export)
        self._metrics_port: int | None = None
        if serve.metrics_endpoint:
            reader, self._prometheus_server, self._metrics_port = _start_prometheus(
                serve.metrics_endpoint
            )
            readers.append(reader)
        self.meter_provider = MeterProvider(
            resource=resource, metric_readers=readers, views=score_views()
        )
        if engine is None:
            # Judges count their calls and tokens on the global meter provider: in the serve
            # process that must be ours, or those metrics never reach /metrics or the export.
            _adopt_as_global(self.meter_provider)
        self.engine = engine or Engine(config)
        self.export = build_verdict_export(serve.export, resource)
        sinks: list[Sink] = [MetricsSink(self.meter_provider, label_skills=config.label_skills)]
        if serve.export.enabled:
            # Building evaluation spans and log records costs as much as evaluating; only
            # worth it when they go somewhere.
            sinks.insert(
                0, OtelVerdictSink(self.export.tracer_provider, self.export.logger_provider)
            )
        spool_config = serve.spool
        self.spool: Spool | MemorySpool = (
            Spool(
                spool_config.path,
                max_bytes=spool_config.max_bytes,
                synchronous=spool_config.synchronous,
                keep_evaluated=spool_config.keep_evaluated,
            )
            if spool_config.enabled
            else MemorySpool(spool_config.keep_evaluated)
        )
        self.worker = Worker(
            self.engine,
            sinks,
            self.spool,
            policy=config.policy,
            limits=config.limits,
            checks=serve.input,
            telemetry=SelfTelemetry(self.meter_provider),
            max_pending_spans=serve.max_pending_spans,
            tick_interval_s=serve.tick_interval_s,
            flush_timeout_s=serve.flush_timeout_s,
            export_full=lambda: self.export.full,
        )
        self.handler = Handler(
            self.worker,
            limits=config.limits,
            checks=serve.input,
            token=serve.auth.token(),
            telemetry=SidecarTelemetry(self.meter_provider, self.worker),
        )
        self.grpc: GrpcReceiver | None = None
        self.http: HttpReceiver | None = None

    def start(self) -> Endpoints:
        """Replay the spool, start the worker, then bind the receivers (ports 0 resolved)."""
        serve = self.serve
        replayed = self.worker.replay()
        if replayed:
            log.info("resuming %d spooled spans from %s", replayed, serve.spool.path)
        self.worker.start()
        self._started = True
        grpc_at = http_at = None
        if serve.grpc_endpoint:
            self.grpc = GrpcReceiver(
                self.handler,
                serve.grpc_endpoint,
                tls=serve.tls,
                max_request_bytes=serve.input.max_request_bytes,
                workers=serve.grpc_workers,
            )
            port = self.grpc.start()
            if port == 0:
                raise OSError(f"cannot bind the gRPC receiver to {serve.grpc_endpoint}")
            grpc_at = f"{_host(serve.grpc_endpoint)}:{port}"
        if serve.http_endpoint:
            self.http = HttpReceiver(
                self.handler,
                serve.http_endpoint,
                tls=serve.tls,
                max_request_bytes=serve.input.max_request_bytes,
                retry_after_s=serve.retry_after_s,
            )
            http_at = f"{_host(serve.http_endpoint)}:{self.http.start()}"
        metrics_at = (
            f"{_host(serve.metrics_endpoint)}:{self._metrics_port}"
            if serve.metrics_endpoint
            else None
        )
        self.endpoints = Endpoints(grpc=grpc_at, http=http_at, metrics=metrics_at)
        return self.endpoints

    def stop(self) -> None:
        """Graceful shutdown within `shutdown_timeout_s`; safe to call twice or before start."""
        if self._stopped:
            return
        self._stopped = True
        serve = self.serve
        deadline = time.monotonic() + serve.shutdown_timeout_s
        grace = min(5.0, serve.shutdown_timeout_s / 4)
        for receiver in (self.grpc, self.http):
            if receiver is not None:
                receiver.stop(grace)
        if self._started:
            self.worker.stop(evaluate_open=serve.on_shutdown == "evaluate", deadline=deadline)
        self.worker.pipeline.shutdown()
        self.export.shutdown()
        left_ms = max(100, int((deadline - time.monotonic()) * 1000))
        self.meter_provider.shutdown(timeout_millis=left_ms)
        if self._prometheus_server is not None:
            self._prometheus_server.shutdown()
            self._prometheus_server.server_close()
        self.spool.close()
