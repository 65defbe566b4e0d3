"""The sidecar's pre-aggregated metrics (`MetricsSink(batch_counters=True)`, which writes each
series' batch into the SDK's aggregations at once) leave exactly the data points that one SDK
call per value leaves, for cumulative and delta readers, and fall back to the public API where a
View changes the aggregation; stale series expire after `series_ttl_s`."""

from __future__ import annotations

import glob
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics import Counter, Histogram, MeterProvider
from opentelemetry.sdk.metrics.export import AggregationTemporality, InMemoryMetricReader
from opentelemetry.sdk.metrics.view import SumAggregation, View

from spanjudge.config import parse_config
from spanjudge.emit.metrics import MetricsSink, score_views
from spanjudge.engine import Engine
from spanjudge.offline import run_offline
from spanjudge.values import SessionResult

ROOT = Path(__file__).resolve().parents[2]
DELTA = {Counter: AggregationTemporality.DELTA, Histogram: AggregationTemporality.DELTA}


class _Collect:
    def __init__(self) -> None:
        self.results: list[SessionResult] = []

    def begin(self) -> None:
        pass

    def session(self, result: SessionResult) -> None:
        self.results.append(result)

    def end(self, summary: Any, input_report: Any) -> None:
        pass


@pytest.fixture(scope="module")
def results() -> list[SessionResult]:
    out = _Collect()
    for folder in ("claude_code", "strands", "genai_manual"):
        config = parse_config(
            {"expectations_files": [str(ROOT / "fixtures" / folder / "expectations.yaml")]}
        )
        files = sorted(glob.glob(str(ROOT / "fixtures" / folder / "*.jsonl")))
        run_offline(files, Engine(config), out, skip_invalid=True)
    assert len(out.results) > 20
    return out.results


def _points(reader: InMemoryMetricReader) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                for p in metric.data.data_points:
                    key = (metric.name, tuple(sorted(p.attributes.items())))
                    if hasattr(p, "bucket_counts"):
                        out[key] = (tuple(p.bucket_counts), p.count, round(p.sum, 9), p.min, p.max)
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
