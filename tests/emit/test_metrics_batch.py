"""The sidecar's pre-aggregated metrics (`MetricsSink(batch_counters=True)`, which writes each
series' batch into the SDK's aggregations at once) leave exactly the data points that one SDK
call per value leaves, for cumulative and delta readers, and fall back to the public API where a
View changes the aggregation; stale series expire after `series_ttl_s`."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.metrics import AlwaysOnExemplarFilter, Counter, Histogram, MeterProvider
from opentelemetry.sdk.metrics.export import AggregationTemporality, InMemoryMetricReader
from opentelemetry.sdk.metrics.view import SumAggregation, View
from opentelemetry.sdk.trace import TracerProvider

from spanjudge.emit.metrics import MetricsSink, SelfTelemetry, score_views
from spanjudge.emit.sdk_series import sdk_checked
from spanjudge.values import SessionResult
from tests.support.fixture_reports import fixture_results

DELTA = {Counter: AggregationTemporality.DELTA, Histogram: AggregationTemporality.DELTA}


@pytest.fixture(scope="module")
def results() -> list[SessionResult]:
    found = fixture_results("claude_code", "strands", "genai_manual")
    assert len(found) > 20
    return found


def _points(reader: InMemoryMetricReader) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                for p in metric.data.data_points:
                    key = (metric.name, tuple(sorted(p.attributes.items())))
                    if hasattr(p, "bucket_counts"):
                        out[key] = (tuple(p.bucket_counts), p.count, p.sum, p.min, p.max)
                    else:
                        out[key] = p.value
    return out


def _run(
    results: list[SessionResult],
    *,
    batched: bool,
    views: list[View] | None = None,
    temporality: Any = None,
    every: int = 3,
) -> list[dict[Any, Any]]:
    """Data points after each flush of ``every`` sessions (one reader per temporality)."""
    reader = InMemoryMetricReader(preferred_temporality=temporality)
    other = InMemoryMetricReader()  # a second reader, as the sidecar has (Prometheus + OTLP)
    provider = MeterProvider(metric_readers=[reader, other], views=views or score_views())
    sink = MetricsSink(provider, batch_counters=batched)
    snapshots = []
    for i, result in enumerate(results, 1):
        sink.emit(result)
        if i % every == 0:
            sink.flush(0.0)
            snapshots.append(_points(reader))
    sink.flush(0.0)
    snapshots.append(_points(reader))
    snapshots.append(_points(other))
    return snapshots


def test_batched_points_equal_one_call_per_value(results: list[SessionResult]) -> None:
    batched = _run(results, batched=True)
    assert batched == _run(results, batched=False)
    final = batched[-1]
    assert any(name == "spanjudge.score" for name, _ in final)
    assert any(name == "spanjudge.verdicts" for name, _ in final)


def test_batched_points_equal_with_a_delta_reader(results: list[SessionResult]) -> None:
    assert _run(results, batched=True, temporality=DELTA) == _run(
        results, batched=False, temporality=DELTA
    )


def test_views_that_change_the_aggregation_fall_back_to_the_sdk(
    results: list[SessionResult],
) -> None:
    views = [
        *score_views(),
        View(instrument_name="spanjudge.session.duration", aggregation=SumAggregation()),
        View(instrument_name="spanjudge.verdicts", attribute_keys={"gen_ai.evaluation.name"}),
    ]
    batched = _run(results, batched=True, views=views)
    assert batched == _run(results, batched=False, views=views)
    assert {a for name, a in batched[-1] if name == "spanjudge.verdicts"} <= {
        (("gen_ai.evaluation.name", e),) for e in {v.evaluator for r in results for v in r.verdicts}
    }


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("batched", [True, False])
def test_series_not_updated_for_the_ttl_expire(results: list[SessionResult], batched: bool) -> None:
    clock = _Clock()
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader], views=score_views())
    sink = MetricsSink(provider, batch_counters=batched, series_ttl_s=60, clock=clock)
    named = [r for r in results if r.trajectory.agent_name]
    first, second = (
        named[0],
        next(r for r in named if r.trajectory.agent_name != named[0].trajectory.agent_name),
    )

    def agents() -> set[str]:
        return {dict(attrs).get("gen_ai.agent.name") for _, attrs in _points(reader)} - {None}

    sink.emit(first)
    sink.flush(0.0)
    assert agents() == {first.trajectory.agent_name}
    clock.now += 50
    sink.emit(second)
    sink.flush(0.0)
    assert agents() == {first.trajectory.agent_name, second.trajectory.agent_name}
    clock.now += 20  # the first agent's series were last updated 70 s ago, the second's 20 s
    assert agents() == {second.trajectory.agent_name}
    series = {name for name, _ in _points(reader)}
    assert "spanjudge.label_series" in series
    clock.now += 61
    assert agents() == set()
    sink.emit(first)  # back: its series start again
    sink.flush(0.0)
    assert agents() == {first.trajectory.agent_name}


def test_no_ttl_keeps_every_series(results: list[SessionResult]) -> None:
    clock = _Clock()
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader], views=score_views())
    sink = MetricsSink(provider, batch_counters=True, series_ttl_s=0, clock=clock)
    sink.emit(results[0])
    sink.flush(0.0)
    before = _points(reader)
    clock.now += 10**9
    assert _points(reader).keys() == before.keys()


def _agents_in(reader: InMemoryMetricReader) -> set[str]:
    return {dict(attrs).get("gen_ai.agent.name") for _, attrs in _points(reader)} - {None}


def _two_agents(results: list[SessionResult]) -> tuple[SessionResult, SessionResult]:
    named = [r for r in results if r.trajectory.agent_name]
    first = named[0]
    second = next(r for r in named if r.trajectory.agent_name != first.trajectory.agent_name)
    return first, second


def test_an_expired_series_comes_back_from_zero(results: list[SessionResult]) -> None:
    clock = _Clock()
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader], views=score_views())
    sink = MetricsSink(provider, batch_counters=True, series_ttl_s=60, clock=clock)
    first, _ = _two_agents(results)
    sink.emit(first)
    sink.flush(0.0)
    once = _points(reader)
    clock.now += 61
    assert _agents_in(reader) == set()
    sink.emit(first)
    sink.flush(0.0)
    # one session's counts, not two: the series restarted (Prometheus sees a counter reset)
    again = {k: v for k, v in _points(reader).items() if k[0] != "spanjudge.label_series"}
    assert again == {k: v for k, v in once.items() if k[0] != "spanjudge.label_series"}


def _public_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the measurements handed to the SDK through its public API."""
    from opentelemetry.sdk.metrics._internal.measurement_consumer import (
        SynchronousMeasurementConsumer,
    )

    calls = [0]
    real = SynchronousMeasurementConsumer.consume_measurement

    def counted(self: Any, measurement: Any) -> None:
        calls[0] += 1
        real(self, measurement)

    monkeypatch.setattr(SynchronousMeasurementConsumer, "consume_measurement", counted)
    return calls


def test_the_merge_is_used_on_the_installed_sdk(
    results: list[SessionResult], monkeypatch: pytest.MonkeyPatch
) -> None:
    from opentelemetry.sdk.version import __version__

    assert sdk_checked(), (
        f"opentelemetry-sdk {__version__}: check emit/sdk_series.py's use of its internals"
        " against this version, then add it to CHECKED_SDK"
    )
    calls = _public_calls(monkeypatch)
    _run(results, batched=True)
    assert calls[0] == 0


def test_an_sdk_version_not_checked_gets_the_public_api_and_keeps_its_series(
    results: list[SessionResult], monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    monkeypatch.setattr("spanjudge.emit.sdk_series.CHECKED_SDK", frozenset({(0, 1)}))
    calls = _public_calls(monkeypatch)
    assert _run(results, batched=True) == _run(results, batched=False)
    assert calls[0] > 0
    # series cannot be removed there: none expires, and the cap on names still holds
    clock = _Clock()
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader], views=score_views())
    sink = MetricsSink(
        provider, batch_counters=True, series_ttl_s=60, max_label_values=1, clock=clock
    )
    first, second = _two_agents(results)
    sink.emit(first)
    sink.flush(0.0)
    clock.now += 61
    assert _agents_in(reader) == {first.trajectory.agent_name}
    sink.emit(second)
    sink.flush(0.0)
    assert _agents_in(reader) == {first.trajectory.agent_name, "other"}
    assert "cannot be removed" in caplog.text


def test_series_expire_with_always_on_exemplars(results: list[SessionResult]) -> None:
    """Exemplars on every value make the sink use the public API; its series still expire."""
    clock = _Clock()
    reader = InMemoryMetricReader()
    provider = MeterProvider(
        metric_readers=[reader], views=score_views(), exemplar_filter=AlwaysOnExemplarFilter()
    )
    sink = MetricsSink(
        provider, batch_counters=True, series_ttl_s=60, max_label_values=1, clock=clock
    )
    first, second = _two_agents(results)
    sink.emit(first)
    sink.flush(0.0)
    assert _exemplars(reader)  # recorded through the public API
    clock.now += 61
    assert _agents_in(reader) == set()
    sink.emit(second)  # the one place under the cap is free again
    sink.flush(0.0)
    assert _agents_in(reader) == {second.trajectory.agent_name}


def test_a_view_folding_series_keeps_them_and_the_cap(results: list[SessionResult]) -> None:
    """A View whose attribute filter folds several series into one: they cannot be removed one
    by one, so they stay exported and their agent name keeps its place under the cap."""
    keys = {"gen_ai.agent.name", "gen_ai.evaluation.name"}
    clock = _Clock()
    reader = InMemoryMetricReader()
    views = [*score_views(), View(instrument_name="spanjudge.verdicts", attribute_keys=keys)]
    provider = MeterProvider(metric_readers=[reader], views=views)
    sink = MetricsSink(
        provider, batch_counters=True, series_ttl_s=60, max_label_values=1, clock=clock
    )
    first, second = _two_agents(results)
    sink.emit(first)
    sink.flush(0.0)
    clock.now += 61
    assert _agents_in(reader) == {first.trajectory.agent_name}  # the verdict series
    sink.emit(second)
    sink.flush(0.0)
    assert _agents_in(reader) == {first.trajectory.agent_name, "other"}


def _exemplars(reader: InMemoryMetricReader) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                for p in metric.data.data_points:
                    if p.exemplars:
                        key = (metric.name, tuple(sorted(p.attributes.items())))
                        out[key] = sorted((e.value, e.trace_id) for e in p.exemplars)
    return out


@pytest.mark.parametrize("batched", [True, False])
def test_exemplars_inside_a_sampled_span(results: list[SessionResult], batched: bool) -> None:
    """With the default trace-based exemplar filter, values recorded inside a sampled span
    carry exemplars of it, batched or not."""
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader], views=score_views())
    sink = MetricsSink(provider, batch_counters=batched)
    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("work") as span:
        sink.emit(results[0])
        sink.flush(0.0)
    found = _exemplars(reader)
    assert any(name == "spanjudge.session.duration" for name, _ in found)
    trace_id = span.get_span_context().trace_id
    assert {t for values in found.values() for _, t in values} == {trace_id}


def test_label_series_counts_the_series_without_a_ttl(results: list[SessionResult]) -> None:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader], views=score_views())
    sink = MetricsSink(provider, batch_counters=True, series_ttl_s=0)
    for result in results[:5]:
        sink.emit(result)
    sink.flush(0.0)
    points = _points(reader)
    carrying_agent = [k for k in points if "gen_ai.agent.name" in dict(k[1])]
    [gauge] = [v for (name, _), v in points.items() if name == "spanjudge.label_series"]
    assert gauge == len(carrying_agent) > 0


def test_collections_running_alongside_lose_and_double_nothing(
    results: list[SessionResult],
) -> None:
    """A delta and a cumulative reader collecting from another thread while the batched sink
    emits and flushes (as the OTLP periodic reader and Prometheus scrapes do in the sidecar):
    the deltas add up to the cumulative points, and those equal one SDK call per value. (The
    merge takes the SDK's own locks where `record()` does; this cannot force that race.)"""
    import threading

    delta = InMemoryMetricReader(preferred_temporality=DELTA)
    cumulative = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[delta, cumulative], views=score_views())
    sink = MetricsSink(provider, batch_counters=True)
    totals: dict[Any, list[Any]] = {}
    collections = [0]

    def add_deltas() -> None:
        for key, value in _points(delta).items():
            counts = value[0] + (value[1],) if isinstance(value, tuple) else (value,)
            seen = totals.setdefault(key, [0] * len(counts))
            totals[key] = [a + b for a, b in zip(seen, counts, strict=True)]
        _points(cumulative)
        collections[0] += 1

    done = threading.Event()

    def collect() -> None:
        while not done.is_set():
            add_deltas()

    thread = threading.Thread(target=collect)
    thread.start()
    sessions = results * 3
    try:
        for i, result in enumerate(sessions, 1):
            sink.emit(result)
            if i % 2 == 0:
                sink.flush(0.0)
        sink.flush(0.0)
    finally:
        done.set()
        thread.join()
    add_deltas()
    assert collections[0] > 2

    def rounded(points: dict[Any, Any]) -> dict[Any, Any]:
        # the SDK folds each collection's histogram sum into its running total: floats added
        # in another grouping than with no collection in between, by either road
        return {
            k: (v[0], v[1], round(v[2], 6), v[3], v[4]) if isinstance(v, tuple) else v
            for k, v in points.items()
            if k[0] != "spanjudge.label_series"
        }

    final = rounded(_points(cumulative))
    reference = MetricsSink(
        MeterProvider(metric_readers=[expected := InMemoryMetricReader()], views=score_views())
    )
    for result in sessions:
        reference.emit(result)
    want = rounded(_points(expected))
    assert final == want
    for key, value in want.items():
        counts = value[0] + (value[1],) if isinstance(value, tuple) else (value,)
        assert totals.get(key) == list(counts), key


def _telemetry_points(batch: bool, temporality: Any = None) -> list[dict[Any, Any]]:
    """Self-telemetry data points read while sessions close: after each of them (no flush: the
    collection takes what is held) and after a flush."""
    reader = InMemoryMetricReader(preferred_temporality=temporality)
    other = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader, other])
    telemetry = SelfTelemetry(provider, batch=batch)
    snapshots = []
    for i, (state, seconds) in enumerate(
        [("evaluated", 0.004), ("incomplete", 0.25), ("evaluated", 0.0), ("evicted", 3.5)] * 3
    ):
        telemetry.session_closed(state)
        telemetry.evaluation_duration(seconds)
        if i % 4 == 3:
            snapshots.append(_points(reader))
    telemetry.session_closed("evaluated")
    telemetry.evaluation_duration(-1.0)  # a clock that went back: recorded as 0
    telemetry.flush()
    snapshots.append(_points(reader))
    snapshots.append(_points(other))
    return snapshots


@pytest.mark.parametrize("temporality", [None, DELTA])
def test_batched_self_telemetry_equals_one_call_per_session(temporality: Any) -> None:
    batched = _telemetry_points(True, temporality)
    assert batched == _telemetry_points(False, temporality)
    last = batched[-2]
    assert last[("spanjudge.sessions", (("spanjudge.session.state", "evaluated"),))] == (
        7 if temporality is None else 1
    )


def test_batched_self_telemetry_keeps_the_order_of_metrics() -> None:
    """Exporters and /metrics list metrics in the order the SDK first saw them: sessions
    closed, then their evaluation time, batched or not."""
    names = []
    for batch in (False, True):
        reader = InMemoryMetricReader()
        telemetry = SelfTelemetry(MeterProvider(metric_readers=[reader]), batch=batch)
        telemetry.session_closed("evaluated")
        telemetry.evaluation_duration(0.1)
        telemetry.flush()
        data = reader.get_metrics_data()
        assert data is not None
        names.append([m.name for m in data.resource_metrics[0].scope_metrics[0].metrics])
    assert names[1] == names[0]
    assert names[0].index("spanjudge.sessions") < names[0].index("spanjudge.evaluation.duration")
