"""`configure_opentelemetry()`: the common in-process setup in one call.

    from spanjudge import configure_opentelemetry

    otel = configure_opentelemetry("spanjudge.yaml")  # or None: the embedded defaults
    ...  # run the agent: frameworks trace to the global TracerProvider
    otel.shutdown()  # evaluates what is still open, then flushes everything out

It builds the tracer, meter and logger providers the way the OpenTelemetry SDK's own
auto-configuration does, from the standard variables: `OTEL_SERVICE_NAME` and
`OTEL_RESOURCE_ATTRIBUTES` (the resource), `OTEL_TRACES_EXPORTER`, `OTEL_METRICS_EXPORTER`,
`OTEL_LOGS_EXPORTER` (`otlp`, the default, `console` or `none`), `OTEL_EXPORTER_OTLP_PROTOCOL`
(`grpc`, the default as with `opentelemetry-instrument`, or `http/protobuf`) and the
`OTEL_EXPORTER_OTLP_*` endpoint, header and TLS variables, which the exporters read themselves.
`SpanJudgeProcessor` is added before the exporting span processor, so that verdicts emitted while
the provider shuts down still reach the exporter. For anything else, build the providers yourself
(the README's full form).
"""

from __future__ import annotations

import logging
import os
from typing import Any

from opentelemetry import _logs, metrics, trace
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from spanjudge.config import Config, load_config
from spanjudge.emit.metrics import score_views
from spanjudge.errors import ConfigError
from spanjudge.processor import SpanJudgeProcessor
from spanjudge.records import record_class

__all__ = ["Telemetry", "configure_opentelemetry"]

log = logging.getLogger("spanjudge")

_KINDS = ("otlp", "console", "none")
_PROTOCOLS = ("grpc", "http/protobuf")


@record_class(frozen=True, slots=True, kw_only=True)
class Telemetry:
    """The providers `configure_opentelemetry` built, and the processor it attached."""

    tracer_provider: TracerProvider
    meter_provider: MeterProvider
    logger_provider: LoggerProvider
    processor: SpanJudgeProcessor

    def shutdown(self) -> None:
        """Tracer first (spanjudge evaluates what is open and emits), then logs and metrics."""
        self.tracer_provider.shutdown()
        self.logger_provider.shutdown()
        self.meter_provider.shutdown()


def _kind(signal: str) -> str:
    name = f"OTEL_{signal.upper()}_EXPORTER"
    value = (os.environ.get(name) or "otlp").strip().lower()
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


def _exporter(signal: str) -> Any:
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
    grpc = _protocol(signal) == "grpc"
    if signal == "traces":
        if grpc:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # type: ignore[assignment]
                OTLPSpanExporter,
            )
        return OTLPSpanExporter()
    if signal == "metrics":
        if grpc:
            from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
        else:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import (  # type: ignore[assignment]
                OTLPMetricExporter,
            )
        return OTLPMetricExporter()
    if grpc:
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
    else:
        from opentelemetry.exporter.otlp.proto.http._log_exporter import (  # type: ignore[assignment]
            OTLPLogExporter,
        )
    return OTLPLogExporter()


def _warn_default_endpoint() -> None:
    """Say where OTLP goes when nothing says so: silence here means verdicts lost unseen."""
    unset = [
        signal
        for signal in ("traces", "metrics", "logs")
        if _kind(signal) == "otlp"
        and not os.environ.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT")
        and not os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
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
) -> Telemetry:
    """Build the three providers from the standard `OTEL_*` variables, attach
    `SpanJudgeProcessor` (with ``config``: a `Config`, a YAML path, or None for the embedded
    defaults), and make them the global providers unless ``set_global`` is false.

    Raises `ConfigError` for a bad configuration file or a bad `OTEL_*_EXPORTER` /
    `OTEL_EXPORTER_OTLP_PROTOCOL` value, before anything is started."""
    if not isinstance(config, Config):
        config = load_config(None if config is None else os.fspath(config))
    exporters = {signal: _exporter(signal) for signal in ("traces", "metrics", "logs")}
    _warn_default_endpoint()
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
    )
    tracer_provider.add_span_processor(processor)  # first: see the module docstring
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
    )
