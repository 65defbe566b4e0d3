"""`Sidecar`: wires receivers, spool, worker, sinks and exporters together, and takes them apart
again in order on shutdown."""

from __future__ import annotations

import errno
import functools
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from opentelemetry import metrics
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.resources import Resource

from spanjudge.config import Config
from spanjudge.emit.base import Sink
from spanjudge.emit.metrics import MetricsSink, SelfTelemetry, score_views
from spanjudge.engine import Engine
from spanjudge.errors import ConfigError
from spanjudge.sidecar.config import ServeConfig
from spanjudge.sidecar.export import (
    build_metric_readers,
    build_verdict_export,
    report_unflushed,
)
from spanjudge.sidecar.export_health import export_health
from spanjudge.sidecar.grpc_receiver import GrpcReceiver
from spanjudge.sidecar.handling import Handler, SidecarTelemetry, bearer_ok
from spanjudge.sidecar.http_receiver import HttpReceiver
from spanjudge.sidecar.metrics_server import MetricsServer
from spanjudge.sidecar.recovery import open_spool
from spanjudge.sidecar.shards import ShardedWorker
from spanjudge.sidecar.spool import ACKED_SUFFIX, MemorySpool, Spool
from spanjudge.sidecar.summary_log import SummaryLog, open_in
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
    # process ids of the evaluation processes (none when evaluation runs in this process)
    workers: tuple[int, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "grpc": self.grpc,
            "http": self.http,
            "metrics": self.metrics,
            "pid": os.getpid(),
            "workers": list(self.workers),
        }


def _host(endpoint: str) -> str:
    return endpoint.rpartition(":")[0]


def _start_prometheus(serve: ServeConfig) -> tuple[Any, MetricsServer, int]:
    from opentelemetry.exporter.prometheus import PrometheusMetricReader

    assert serve.metrics_endpoint is not None
    token = serve.auth.token()
    server = MetricsServer(
        serve.metrics_endpoint,
        tls=serve.tls,
        authorized=functools.partial(bearer_ok, token=token.encode() if token else None),
    )
    return PrometheusMetricReader(), server, server.port


_BIND_FIXES = {
    errno.EADDRINUSE: "address already in use; stop what listens there or choose another port"
    " (port 0 picks a free one)",
    errno.EACCES: "permission denied; ports below 1024 need privileges, choose a higher one",
    errno.EADDRNOTAVAIL: "cannot assign requested address; the host is not an address of this"
    " machine (127.0.0.1 or 0.0.0.0 are)",
}


def _probe_bind(endpoint: str) -> int | None:
    """The errno of binding a plain socket to ``endpoint`` as servers do (SO_REUSEADDR), or
    None when it binds. gRPC only reports "failed to bind", and logs noise to stderr doing so."""
    host, _, port = endpoint.rpartition(":")
    try:
        family, _, _, _, address = socket.getaddrinfo(
            host.strip("[]"), int(port), type=socket.SOCK_STREAM
        )[0]
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)
    except OSError as exc:
        return exc.errno if exc.errno is not None else errno.EADDRNOTAVAIL
    return None


def _bind_reason(endpoint: str, exc: BaseException) -> str:
    """What went wrong binding ``endpoint``, with the fix."""
    code = exc.errno if isinstance(exc, OSError) else None
    if code is None:
        code = _probe_bind(endpoint)
    if code in _BIND_FIXES:
        return _BIND_FIXES[code]
    if code is not None:
        return os.strerror(code).lower()
    return str(exc)


def _bind(setting: str, endpoint: str, source: str | None, bind: Callable[[], Any]) -> Any:
    """Run ``bind``; a failure is a configuration error naming the setting and the address."""
    try:
        return bind()
    except (OSError, RuntimeError) as exc:
        problem = f"serve.{setting} {endpoint}: {_bind_reason(endpoint, exc)}"
        raise ConfigError(problem, source=source) from None


_SPOOL_FILES = ("", "-wal", "-shm", "-journal", ACKED_SUFFIX)


def _discard_new_spool(path: str) -> None:
    """Remove a spool this start created: a failed start leaves nothing behind in the cwd."""
    for suffix in _SPOOL_FILES:
        try:
            os.remove(path + suffix)
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("cannot remove the new spool %s%s: %s", path, suffix, exc.strerror)


class Sidecar:
    """`spanjudge serve` as an object: `start()` binds everything, `stop()` drains it."""

    def __init__(self, config: Config, serve: ServeConfig, *, engine: Engine | None = None) -> None:
        self.config = config
        self.serve = serve
        self.endpoints: Endpoints | None = None
        self._prometheus_server: Any = None
        self._started = False
        self._stopped = False
        self._stop_lock = threading.Lock()
        self.stopping = "starting the shutdown"  # the step a shutdown is in (or last took)
        attributes = {"service.name": os.environ.get("OTEL_SERVICE_NAME", "spanjudge")}
        if "service.instance.id" not in os.environ.get("OTEL_RESOURCE_ATTRIBUTES", ""):
            # Replicas must not overwrite each other's series after remote write.
            attributes["service.instance.id"] = f"{socket.gethostname()}-{os.getpid()}"
        resource = Resource.create(attributes)
        # The spool first: it is the likeliest to fail, and it holds no thread or port.
        self._new_spool = serve.spool.enabled and not os.path.lexists(serve.spool.path)
        self.spool: Spool | MemorySpool = open_spool(serve, config.source)
        readers, self._metric_export = build_metric_readers(serve.export)
        self._metrics_port: int | None = None
        if serve.metrics_endpoint:
            endpoint = serve.metrics_endpoint
            try:
                reader, self._prometheus_server, self._metrics_port = _bind(
                    "metrics_endpoint", endpoint, config.source, lambda: _start_prometheus(serve)
                )
            except ConfigError:
                self.spool.close()
                if self._new_spool:
                    _discard_new_spool(serve.spool.path)
                raise
            # First: its shutdown is instant, so a slow OTLP reader cannot starve it of time.
            readers.insert(0, reader)
        self.meter_provider = MeterProvider(
            resource=resource, metric_readers=readers, views=score_views()
        )
        if engine is None:
            # Judges count their calls and tokens on the global meter provider: in the serve
            # process that must be ours, or those metrics never reach /metrics or the export.
            _adopt_as_global(self.meter_provider)
        self.engine = engine or Engine(config)
        # Per-session measurements handed over with each flush of the sinks and before every
        # collection, one step per series.
        telemetry = SelfTelemetry(self.meter_provider, batch=True)
        self.export = build_verdict_export(
            serve.export, resource, telemetry.internal_error, telemetry.verdicts_dropped
        )
        sinks: list[Sink] = [
            MetricsSink(
                self.meter_provider,
                label_skills=config.label_skills,
                label_agents=config.label_agents,
                max_label_values=config.max_label_values,
                series_ttl_s=config.series_ttl_s,
                # the worker flushes the sinks after every tick that emitted
                batch_counters=True,
            )
        ]
        # An engine handed in (tests, embedding) cannot be sent to other processes.
        self.workers = 1 if engine is not None else serve.workers
        if serve.export.enabled and self.workers == 1:
            # Encoding evaluation spans and log records is only worth it when they go
            # somewhere. (Evaluation processes export their own.)
            sinks.insert(0, self.export.sink())
        self.summary = SummaryLog(self._open_sessions, self._export_state)
        sinks.append(self.summary)
        settings: dict[str, Any] = {
            "policy": config.policy,
            "limits": config.limits,
            "checks": serve.input,
            "telemetry": telemetry,
            "max_pending_spans": serve.max_pending_spans,
            "max_pending_age_s": serve.max_pending_age_s,
            "max_pending_bytes": serve.max_pending_bytes,
            "tick_interval_s": serve.tick_interval_s,
            "flush_timeout_s": serve.flush_timeout_s,
            "export_full": lambda: self.export.full,
        }
        if self.workers == 1:
            self.worker: Worker = Worker(self.engine, sinks, self.spool, **settings)
        else:
            self.worker = ShardedWorker(
                self.engine,
                sinks,
                self.spool,
                workers=self.workers,
                config=config,
                export=serve.export,
                resource=dict(resource.attributes),
                keep_evaluated=serve.spool.keep_evaluated,
                stuck_timeout_s=serve.worker_stuck_timeout_s,
                **settings,
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
        """Replay the spool, start the worker, then bind the receivers (ports 0 resolved).

        A receiver that cannot bind raises `ConfigError` naming its setting, after everything
        already started was stopped again."""
        try:
            return self._start()
        except BaseException:
            # A spool this start created holds nothing unless a receiver already took a request.
            discard = self._new_spool and self.spool.last_request_id() == 0
            self.stop()
            if discard:
                _discard_new_spool(self.serve.spool.path)
            raise

    def _start(self) -> Endpoints:
        serve = self.serve
        source = self.config.source
        replayed = self.worker.replay()
        if replayed:
            log.info("resuming %d spooled spans from %s", replayed, serve.spool.path)
        self.worker.start()
        self.summary.start()
        self._started = True
        grpc_at = http_at = None
        busy: list[str] = []  # every receiver that cannot bind is reported, not the first only
        if serve.grpc_endpoint:
            self.grpc = GrpcReceiver(
                self.handler,
                serve.grpc_endpoint,
                tls=serve.tls,
                max_request_bytes=serve.input.max_request_bytes,
                workers=serve.grpc_workers,
            )
            try:
                port = _bind("grpc_endpoint", serve.grpc_endpoint, source, self._start_grpc)
                grpc_at = f"{_host(serve.grpc_endpoint)}:{port}"
            except ConfigError as exc:
                busy.extend(exc.problems)
        if serve.http_endpoint:
            endpoint = serve.http_endpoint
            try:
                self.http = _bind(
                    "http_endpoint",
                    endpoint,
                    source,
                    lambda: HttpReceiver(
                        self.handler,
                        endpoint,
                        tls=serve.tls,
                        max_request_bytes=serve.input.max_request_bytes,
                        retry_after_s=serve.retry_after_s,
                    ),
                )
                http_at = f"{_host(endpoint)}:{self.http.start()}"
            except ConfigError as exc:
                busy.extend(exc.problems)
        if busy:
            raise ConfigError(busy, source=source)
        metrics_at = (
            f"{_host(serve.metrics_endpoint)}:{self._metrics_port}"
            if serve.metrics_endpoint
            else None
        )
        pids = self.worker.pids if isinstance(self.worker, ShardedWorker) else ()
        self.endpoints = Endpoints(grpc=grpc_at, http=http_at, metrics=metrics_at, workers=pids)
        return self.endpoints

    def _start_grpc(self) -> int:
        assert self.grpc is not None
        endpoint = self.grpc.endpoint
        # Probe a busy port first: gRPC would log a C-level error line to stderr. Anything
        # else is left to gRPC itself, which resolves and binds hosts its own way.
        code = None if endpoint.endswith(":0") else _probe_bind(endpoint)
        if code in (errno.EADDRINUSE, errno.EACCES):
            raise OSError(code, os.strerror(code))
        return self.grpc.start()

    def stop(self) -> None:
        """Graceful shutdown within `shutdown_timeout_s`; safe to call twice or before start.

        Never raises: a component that cannot flush in time is logged in one line saying what
        stays in the spool. At the deadline the verdict exporters are aborted (their retries
        end, a call in flight is cancelled), so an unreachable endpoint cannot hold the exit."""
        with self._stop_lock:  # a second caller waits for the first one's shutdown to end
            if self._stopped:
                return
            self._stopped = True
            self._stop()

    def _stop(self) -> None:
        serve = self.serve
        # Keep a margin for the interpreter's own exit, and the end of the budget for the
        # metric readers, the servers and the spool.
        budget = serve.shutdown_timeout_s - min(1.0, serve.shutdown_timeout_s / 10)
        deadline = time.monotonic() + budget
        watchdog = threading.Timer(budget - min(2.0, budget / 5), self.export.abort)
        watchdog.daemon = True
        watchdog.start()
        try:
            grace = min(5.0, budget / 4)
            for receiver in (self.grpc, self.http):
                if receiver is not None:
                    self._step("stopping a receiver", functools.partial(receiver.stop, grace))
            if self._started:
                self._step(
                    "draining the worker",
                    lambda: self.worker.stop(
                        evaluate_open=serve.on_shutdown == "evaluate", deadline=deadline
                    ),
                )
        finally:
            watchdog.cancel()
        self._report_unflushed()
        self._step("shutting down the sinks", self.worker.pipeline.shutdown)
        self._step("shutting down the verdict export", self.export.shutdown)
        left_ms = max(100, int((deadline - time.monotonic()) * 1000))
        self._step(
            "shutting down metrics", lambda: self.meter_provider.shutdown(timeout_millis=left_ms)
        )
        state = self._metric_export
        if state is not None and state.failed:
            log.warning(
                "shutdown: metrics export to %s did not complete; metrics since the last"
                " successful export are not sent (nothing of them is spooled)",
                self._export_target(),
            )
        if self._prometheus_server is not None:
            self._step("closing /metrics", self._prometheus_server.shutdown)
            self._step("closing /metrics", self._prometheus_server.server_close)
        self._step("closing the spool", self.spool.close)

    def _step(self, what: str, step: Callable[[], object]) -> None:
        """Run one shutdown step; a failure is one log line, and the shutdown goes on."""
        self.stopping = what
        try:
            step()
        except Exception as exc:
            log.error("shutdown: %s failed: %s", what, " ".join(str(exc).split()))

    def _open_sessions(self) -> tuple[int, float | None] | None:
        """For the summary line: open sessions and the oldest one's age (with evaluation
        processes, as each last reported them)."""
        if isinstance(self.worker, ShardedWorker):
            return self.worker.open_sessions()
        return open_in(self.worker.store)

    def _export_state(self) -> str:
        if not self.serve.export.enabled:
            return "off"
        health = export_health(self.serve.export)
        state = f"failing ({health.detail or 'no answer'})" if health.failing else "ok"
        return state + (", backlog full: evaluation paused" if self.export.full else "")

    def _export_target(self) -> str:
        return self.serve.export.endpoint or "the OTLP endpoint"

    def _report_unflushed(self) -> None:
        """One line per verdict exporter that still holds items after the worker stopped."""
        spool = self.spool.path if isinstance(self.spool, Spool) else None
        report_unflushed(
            self.export, self._export_target(), self.worker.unconfirmed_sessions, spool
        )
