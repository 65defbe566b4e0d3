"""The agent label on verdicts and metrics comes from `service.name` when no span names the
agent (`gen_ai.agent.name`): a plain OpenTelemetry user sets OTEL_SERVICE_NAME and nothing else."""

from __future__ import annotations

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

from spanjudge import SpanJudgeProcessor, semconv


def _agent_labels(resource: dict[str, str]) -> set[str]:
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    tracer_provider = TracerProvider(resource=Resource.create(resource))
    tracer_provider.add_span_processor(
        SpanJudgeProcessor(tracer_provider=tracer_provider, meter_provider=meters)
    )
    tracer = tracer_provider.get_tracer("agent")
    with tracer.start_as_current_span(
        "invoke_agent", attributes={"session.id": "s1", "gen_ai.operation.name": "invoke_agent"}
    ):
        pass
    tracer_provider.shutdown()
    data = reader.get_metrics_data()
    labels = set()
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if metric.name == semconv.M_VERDICTS:
                    for point in metric.data.data_points:
                        labels.add(str(point.attributes.get(semconv.GEN_AI_AGENT_NAME)))
    meters.shutdown()
    return labels


def test_service_name_labels_the_agent_when_nothing_else_does() -> None:
    assert _agent_labels({"service.name": "checkout-bot"}) == {"checkout-bot"}


def test_the_sdk_placeholder_service_name_is_not_an_agent() -> None:
    assert _agent_labels({}) == {"unknown"}  # the SDK's unknown_service:python stays unknown
