"""`configure_opentelemetry()`: the common in-process setup in one call.

    from spanjudge import configure_opentelemetry

    otel = configure_opentelemetry("spanjudge.yaml")  # or None: the embedded defaults
    ...  # run the agent: frameworks trace to the global TracerProvider
    otel.shutdown()  # evaluates what is still open, then flushes everything out

It builds the tracer, meter and logger providers the way the OpenTelemetry SDK's own
auto-configuration does, from the standard variables: `OTEL_SERVICE_NAME` and
`OTEL_RESOURCE_ATTRIBUTES` (the resource), `OTEL_TRACES_EXPORTER`, `OTEL_METRICS_EXPORTER`,
`OTEL_LOGS_EXPORTER` (`otlp`, `console` or `none`), `OTEL_EXPORTER_OTLP_PROTOCOL`
(`grpc`, the default as with `opentelemetry-instrument`, or `http/protobuf`) and the
`OTEL_EXPORTER_OTLP_*` endpoint, header and TLS variables, which the exporters read themselves.
A signal whose exporter is not chosen goes to OTLP when an endpoint is set; with no endpoint at
all nothing is exported and the verdicts are printed on stderr instead (the console sink, also
on with ``SPANJUDGE_CONSOLE=1``, off with ``SPANJUDGE_CONSOLE=0``): a Collector that is not there
would only lose them. With ``OTEL_SDK_DISABLED=true`` nothing is exported or evaluated.
`SpanJudgeProcessor` is added before the exporting span processor, so that verdicts emitted while
the provider shuts down still reach the exporter. For anything else, build the providers yourself
(the README's full form).

Behind an unreachable endpoint the OTLP exporters' own lines on every retry give way to one
warning naming the endpoint and the cause, and one line when export works again (as in `serve`,
`spanjudge.export_health`); theirs show with the ``spanjudge`` logger at DEBUG. Only the lines of
these exporters are replaced: an exporter the application built itself keeps its own. At shutdown,
exporting gets ``shutdown_export_s`` (5 s) from the first export call of the shutdown (the time
spanjudge takes to evaluate is not counted): then the exporters are stopped, with a line saying
what was not delivered.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from typing import Any

from opentelemetry import _logs, metrics, trace
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from spanjudge.config import Config, load_config
from spanjudge.emit.console import console_from_env
from spanjudge.emit.metrics import score_views
from spanjudge.errors import ConfigError
from spanjudge.export_health import ExportHealth, exporting, health_for
from spanjudge.processor import SpanJudgeProcessor

__all__ = ["Telemetry", "configure_opentelemetry"]

log = logging.getLogger("spanjudge")

_KINDS = ("otlp", "console", "none")
_PROTOCOLS = ("grpc", "http/protobuf")


@dataclass(frozen=True, slots=True, kw_only=True)
class Telemetry:
    """The providers `configure_opentelemetry` built, and the processor it attached."""

    tracer_provider: TracerProvider
    meter_provider: MeterProvider
    logger_provider: LoggerProvider
    processor: SpanJudgeProcessor
    otlp: OtlpExport | None = None  # the OTLP exporters, their health and the shutdown bound

    def shutdown(self) -> None:
        """Tracer first (spanjudge evaluates what is open and emits), then logs and metrics;
        exporting is bounded (see the module docstring)."""
        self.tracer_provider.shutdown()
        self.logger_provider.shutdown()
        self.meter_provider.shutdown()
        if self.otlp is not None:
            self.otlp.finish()


_OUTCOME = (
    "the OpenTelemetry SDK drops a batch once its retries within OTEL_EXPORTER_OTLP_TIMEOUT"
    " (10 s) failed, so verdicts are lost while this lasts; start the Collector or set"
    " OTEL_EXPORTER_OTLP_ENDPOINT (the SDK's own retry lines show with the spanjudge logger at"
    " DEBUG)"
)


class OtlpExport:
    """The OTLP exporters of one `configure_opentelemetry` call: each export's outcome goes to
    the `ExportHealth` of its endpoint, and at shutdown they get ``bound_s`` once spanjudge has
    evaluated (the SDK would wait for every retry: ~16 s behind a closed port)."""

    def __init__(self, bound_s: float) -> None:
        self.bound_s = bound_s
        self.aborted = False
        self.stopping = False
        self._exporters: list[Any] = []
        self._healths: dict[str, ExportHealth] = {}
        self._busy = 0
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None

    def exporter(self, cls: Any, signal: str, target: str) -> Any:
        """An instance of exporter class ``cls`` whose exports report to ``target``'s health."""
        health = self._healths[signal] = health_for(target, 0, logger=log, outcome=_OUTCOME)
        owner = self

        class Tracked(cls):  # type: ignore[misc]
            _spanjudge_down = False

            def export(self, *args: Any, **kwargs: Any) -> Any:
                if owner.stopping:
                    owner.arm()
                with owner._lock:
                    owner._busy += 1
                try:
                    with exporting(health):
                        result = super().export(*args, **kwargs)
                except Exception as exc:
                    if not owner.aborted:
                        health.result(signal, False, exc)
                    raise
                finally:
                    with owner._lock:
                        owner._busy -= 1
                if not owner.aborted:
                    health.result(signal, getattr(result, "name", "") == "SUCCESS")
                return result

            def shutdown(self, *args: Any, **kwargs: Any) -> None:
                with owner._lock:
                    if self._spanjudge_down:
                        return
                    self._spanjudge_down = True
                super().shutdown(*args, **kwargs)

        Tracked.__name__ = Tracked.__qualname__ = cls.__name__
        instance = Tracked()
        self._exporters.append(instance)
        return instance

    def begin(self) -> None:
        """Shutdown starts: the bound runs from the first export call from now on."""
        self.stopping = True
        if self._busy:
            self.arm()

    def arm(self) -> None:
        """Start the shutdown bound (once)."""
        with self._lock:
            if self._timer is None:
                self._timer = threading.Timer(self.bound_s, self._expire)
                self._timer.daemon = True
                self._timer.start()

    def _expire(self) -> None:
        with self._lock:
            if not self._busy:
                return
            self.aborted = True
        log.warning(
            "spanjudge: export to %s did not finish within %g s of shutdown (%s); stopped: the"
            " verdicts not yet sent are lost",
            self._target(),
            self.bound_s,
            self._cause(),
        )
        for exporter in self._exporters:
            try:
                exporter.shutdown()
            except Exception:  # stopping, whatever the exporter says
                log.debug("spanjudge: exporter shutdown failed", exc_info=True)

    def finish(self) -> None:
        """After the providers' shutdown: say so if what was exported last was not accepted."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
        if self.aborted:
            return
        failing = [health for health in self._healths.values() if health.failing]
        if failing:
            log.warning(
                "spanjudge: at exit, verdicts could not be delivered: export to %s is failing (%s)",
                self._target(),
                self._cause(),
            )

    def _target(self) -> str:
        return ", ".join(sorted({health.target for health in self._healths.values()}))

    def _cause(self) -> str:
        details = {health.detail for health in self._healths.values() if health.detail}
        return "; ".join(sorted(details)) or "no answer"


class _Bound(SpanProcessor):
    """Added before `SpanJudgeProcessor` (``first``: shutdown begins) and after it (spanjudge
    has evaluated and emitted: the bound runs, before the exporting processor's shutdown)."""

    def __init__(self, otlp: OtlpExport, *, first: bool) -> None:
        self._otlp = otlp
        self._first = first

    def shutdown(self) -> None:
        if self._first:
            self._otlp.begin()
        else:
            self._otlp.arm()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def _has_endpoint(signal: str) -> bool:
    return bool(
        os.environ.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT")
        or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    )


def _kind(signal: str) -> str:
    name = f"OTEL_{signal.upper()}_EXPORTER"
    value = (os.environ.get(name) or "").strip().lower()
    if not value:
        # Not chosen: OTLP where an endpoint says where to; else nothing (see the docstring).
        return "otlp" if _has_endpoint(signal) else "none"
    if value not in _KINDS:
        raise ConfigError(f"env {name}: expected one of {', '.join(_KINDS)}, got {value!r}")
    return value


def _protocol(signal: str) -> str:
    for name in (f"OTEL_EXPORTER_OTLP_{signal.upper()}_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        value = os.environ.get(name)
        if value:
            if value not in _PROTOCOLS:
                raise ConfigError(
                    f"env {name}: expected one of {', '.join(_PROTOCOLS)}, got {value!r}"
                )
            return value
    return "grpc"


def _exporter(signal: str, otlp: OtlpExport) -> Any:
    """The exporter for ``signal`` ("traces", "metrics", "logs"), or None for `none`."""
    kind = _kind(signal)
    if kind == "none":
        return None
    if kind == "console":
        if signal == "traces":
            from opentelemetry.sdk.trace.export import ConsoleSpanExporter

            return ConsoleSpanExporter()
        if signal == "metrics":
            from opentelemetry.sdk.metrics.export import ConsoleMetricExporter

            return ConsoleMetricExporter()
        from opentelemetry.sdk._logs.export import ConsoleLogRecordExporter

        return ConsoleLogRecordExporter()
    protocol = _protocol(signal)
    endpoint = (
        os.environ.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT")
        or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or ("localhost:4317" if protocol == "grpc" else "localhost:4318")
    )
    cls: Any
    if signal == "traces":
        if protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # type: ignore[assignment]
                OTLPSpanExporter,
            )
        cls = OTLPSpanExporter
    elif signal == "metrics":
        if protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
        else:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import (  # type: ignore[assignment]
                OTLPMetricExporter,
            )
        cls = OTLPMetricExporter
    else:
        if protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
        else:
            from opentelemetry.exporter.otlp.proto.http._log_exporter import (  # type: ignore[assignment]
                OTLPLogExporter,
            )
        cls = OTLPLogExporter
    return otlp.exporter(cls, signal, f"OTLP {protocol} {endpoint}")


def _warn_default_endpoint() -> None:
    """Say where OTLP goes when nothing says so: silence here means verdicts lost unseen."""
    unset = [
        signal
        for signal in ("traces", "metrics", "logs")
        if _kind(signal) == "otlp" and not _has_endpoint(signal)
    ]
    if unset:
        log.warning(
            "no OTEL_EXPORTER_OTLP_ENDPOINT: %s go to the OTLP default (localhost:4317 for"
            " grpc, :4318 for http/protobuf); set it, or OTEL_%s_EXPORTER=none to export nothing",
            ", ".join(unset),
            unset[0].upper(),
        )


def configure_opentelemetry(
    config: Config | str | os.PathLike[str] | None = None,
    *,
    resource: Resource | None = None,
    set_global: bool = True,
    shutdown_export_s: float = 5.0,
) -> Telemetry:
    """Build the three providers from the standard `OTEL_*` variables, attach
    `SpanJudgeProcessor` (with ``config``: a `Config`, a YAML path, or None for the embedded
    defaults), and make them the global providers unless ``set_global`` is false. At shutdown,
    exporting gets ``shutdown_export_s`` once spanjudge has evaluated.

    Raises `ConfigError` for a bad configuration file or a bad `OTEL_*_EXPORTER` /
    `OTEL_EXPORTER_OTLP_PROTOCOL` value, before anything is started."""
    if not isinstance(config, Config):
        config = load_config(None if config is None else os.fspath(config))
    otlp = OtlpExport(shutdown_export_s)
    signals = ("traces", "metrics", "logs")
    disabled = os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"
    exporters = {signal: None if disabled else _exporter(signal, otlp) for signal in signals}
    for signal in signals:
        _protocol(signal)  # a bad value is an error even while no OTLP exporter uses it
    if not disabled:
        _warn_default_endpoint()
    console = console_from_env()
    if console is None:
        console = not any(_has_endpoint(signal) for signal in signals)
    resource = resource or Resource.create()
    logger_provider = LoggerProvider(resource=resource)
    if exporters["logs"] is not None:
        logger_provider.add_log_record_processor(BatchLogRecordProcessor(exporters["logs"]))
    readers: list[MetricReader] = []
    if exporters["metrics"] is not None:
        readers.append(PeriodicExportingMetricReader(exporters["metrics"]))
    meter_provider = MeterProvider(resource=resource, metric_readers=readers, views=score_views())
    tracer_provider = TracerProvider(resource=resource)
    processor = SpanJudgeProcessor(
        config,
        tracer_provider=tracer_provider,
        logger_provider=logger_provider,
        meter_provider=meter_provider,
        console=console,
    )
    # content some instrumentations record as log records (the GenAI events) reaches it too
    logger_provider.add_log_record_processor(processor.log_record_processor)
    tracer_provider.add_span_processor(_Bound(otlp, first=True))
    tracer_provider.add_span_processor(processor)  # before the exporter: see the docstring
    tracer_provider.add_span_processor(_Bound(otlp, first=False))
    if exporters["traces"] is not None:
        tracer_provider.add_span_processor(BatchSpanProcessor(exporters["traces"]))
    if set_global:
        trace.set_tracer_provider(tracer_provider)
        metrics.set_meter_provider(meter_provider)
        _logs.set_logger_provider(logger_provider)
    return Telemetry(
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        logger_provider=logger_provider,
        processor=processor,
        otlp=otlp,
    )
