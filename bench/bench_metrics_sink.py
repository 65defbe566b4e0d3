"""Metrics cost per evaluated session in the sidecar: pre-aggregated series against the SDK path.

    python bench/bench_metrics_sink.py [--repeats 5] [--copies 4]

The sessions are the fixtures' (evaluated once, offline); each is emitted through a
`MetricsSink` on a `MeterProvider` with two readers, as in `spanjudge serve` (Prometheus and
the OTLP periodic reader), and the sink is flushed every K sessions as the worker flushes after
each tick that emitted (K = 1, 10 and 100 sessions per tick). Three paths, alternated in one run
(the best of ``--repeats`` each):

- ``per-call``: every counter increment and histogram value one SDK call (the processor's path);
- ``previous``: the sidecar before pre-aggregation: counter increments summed per series and
  flushed, each histogram value one `Histogram.record` call;
- ``batched``: counters and histograms collected per series and written into the SDK's
  aggregations in one step per series and flush (`spanjudge.emit.sdk_series`).

It also checks that the three leave the same data points. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import glob
import time
from pathlib import Path
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from spanjudge.config import parse_config
from spanjudge.emit.metrics import MetricsSink, score_views
from spanjudge.engine import Engine
from spanjudge.offline import run_offline
from spanjudge.values import SessionResult

ROOT = Path(__file__).resolve().parents[1]


class _Collect:
    def __init__(self) -> None:
        self.results: list[SessionResult] = []

    def begin(self) -> None:
        pass

    def session(self, result: SessionResult) -> None:
        self.results.append(result)

    def end(self, summary: Any, input_report: Any) -> None:
        pass


def fixture_results() -> list[SessionResult]:
    out = _Collect()
    for folder in sorted((ROOT / "fixtures").iterdir()):
        files = sorted(glob.glob(str(folder / "*.jsonl")))
        if not files:
            continue
        expectations = folder / "expectations.yaml"
        raw = {"expectations_files": [str(expectations)]} if expectations.exists() else {}
        try:
            config = parse_config(raw)
        except Exception:  # a fixture whose expectations need more than this: defaults
            config = parse_config({})
        run_offline(files, Engine(config), out, skip_invalid=True)
    return out.results


def _sink(mode: str) -> tuple[MetricsSink, list[InMemoryMetricReader]]:
    readers = [InMemoryMetricReader(), InMemoryMetricReader()]
    provider = MeterProvider(metric_readers=readers, views=score_views())
    sink = MetricsSink(provider, batch_counters=mode != "per-call")
    if mode == "previous":
        sink._sdk.checked = False  # as on an SDK version not checked: the public API only
    return sink, readers


def run(mode: str, results: list[SessionResult], per_flush: int) -> float:
    """Seconds per session."""
    sink, _ = _sink(mode)
    start = time.perf_counter()
    for i, result in enumerate(results, 1):
        sink.emit(result)
        if i % per_flush == 0:
            sink.flush(0.0)
    sink.flush(0.0)
    return (time.perf_counter() - start) / len(results)


def points(mode: str, results: list[SessionResult]) -> dict[Any, Any]:
    sink, readers = _sink(mode)
    for i, result in enumerate(results, 1):
        sink.emit(result)
        if i % 7 == 0:
            sink.flush(0.0)
    sink.flush(0.0)
    out: dict[Any, Any] = {}
    data = readers[0].get_metrics_data()
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                for p in metric.data.data_points:
                    attrs = tuple(sorted(p.attributes.items()))
                    if hasattr(p, "bucket_counts"):
                        value: Any = (tuple(p.bucket_counts), p.sum, p.min, p.max)
                    else:
                        value = p.value
                    out[(metric.name, attrs)] = value
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--copies", type=int, default=4, help="passes over the fixture sessions")
    args = parser.parse_args()
    results = fixture_results() * args.copies
    fixtures = len(results) // args.copies
    print(f"{len(results)} sessions ({fixtures} fixture sessions x {args.copies})")
    reference = points("per-call", results)
    for mode in ("previous", "batched"):
        same = points(mode, results) == reference
        print(f"  {mode}: same data points as per-call: {same}")
    modes = ("per-call", "previous", "batched")
    for per_flush in (1, 10, 100):
        best = {mode: float("inf") for mode in modes}
        for _ in range(args.repeats):
            for mode in modes:
                best[mode] = min(best[mode], run(mode, results, per_flush))
        line = ", ".join(f"{m} {best[m] * 1e6:,.0f} us" for m in modes)
        print(
            f"flush every {per_flush:>3} sessions: {line}; batched is"
            f" {best['previous'] / best['batched']:.2f}x faster than previous,"
            f" {best['per-call'] / best['batched']:.2f}x than per-call"
        )


if __name__ == "__main__":
    main()
