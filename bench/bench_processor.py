"""In-process benchmark (ARCHITECTURE.md section 11): `on_end` cost against
`BatchSpanProcessor`, agent-turn overhead, worker throughput. Prints figures and ratios;
asserts nothing.

    python3 bench/bench_processor.py [--spans 20000] [--turns 300] [--sessions 1000]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from spanjudge.demo.agent import SCENARIOS, ScriptedAgent
from spanjudge.engine import Engine
from spanjudge.pipeline import Pipeline
from spanjudge.processor import SpanJudgeProcessor
from spanjudge.sessions.store import SessionStore
from spanjudge.spans.sdk import span_from_sdk
from spanjudge.values import SessionResult

HOUR_MS = 3_600_000


class NoOpExporter(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


class Count:
    def __init__(self) -> None:
        self.n = 0

    def emit(self, result: SessionResult) -> None:
        self.n += 1

    def flush(self, timeout_s: float) -> bool:
        return True

    def shutdown(self) -> None:
        pass


def real_spans(n: int) -> list[ReadableSpan]:
    """Ended SDK spans from the scripted agent, distinct sessions, at least ``n`` of them."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    agent = ScriptedAgent(provider)
    i = 0
    while len(exporter.get_finished_spans()) < n:
        scenario = SCENARIOS[i % len(SCENARIOS)]
        agent.run(replace(scenario, session_id=f"{scenario.session_id}-{i}"), end_session=True)
        i += 1
    provider.shutdown()
    return list(exporter.get_finished_spans())[:n]


def per_span_ns(make: Callable[[int], Any], spans: list[ReadableSpan], rounds: int) -> float:
    """Best-of-rounds nanoseconds per `on_end` call; a fresh processor each round."""
    best = float("inf")
    for _ in range(rounds):
        processor = make(len(spans) + 1)
        on_end = processor.on_end
        started = time.perf_counter_ns()
        for span in spans:
            on_end(span)
        best = min(best, (time.perf_counter_ns() - started) / len(spans))
        processor.shutdown()
    return best


def bench_on_end(n: int, rounds: int) -> None:
    spans = real_spans(n)

    def batch(size: int) -> BatchSpanProcessor:
        # Queue and batch large enough that its worker neither drops nor exports mid-run.
        return BatchSpanProcessor(
            NoOpExporter(),
            max_queue_size=size,
            max_export_batch_size=size,
            schedule_delay_millis=HOUR_MS,
        )

    def judge(size: int) -> SpanJudgeProcessor:
        return SpanJudgeProcessor(
            sinks=[Count()], max_queue_size=size, max_batch_size=size, tick_interval_s=3600
        )

    bsp, sj = [], []
    for _ in range(3):  # interleaved, so drift affects both alike
        bsp.append(per_span_ns(batch, spans, rounds))
        sj.append(per_span_ns(judge, spans, rounds))
    b, s = min(bsp), min(sj)
    print(f"on_end per span ({len(spans)} real spans, best of {3 * rounds} rounds):")
    print(f"  BatchSpanProcessor(no-op exporter)  {b:8.0f} ns")
    print(f"  SpanJudgeProcessor                  {s:8.0f} ns")
    print(f"  ratio                               {s / b:8.2f}x   (budget <= 1.5x)")


def bench_turns(turns: int) -> None:
    def provider(with_judge: bool) -> tuple[TracerProvider, SpanJudgeProcessor | None]:
        p = TracerProvider()
        judge = None
        if with_judge:
            judge = SpanJudgeProcessor(tracer_provider=p, sinks=[Count()])
            p.add_span_processor(judge)
        p.add_span_processor(BatchSpanProcessor(NoOpExporter()))
        return p, judge

    timings: dict[bool, list[float]] = {False: [], True: []}
    for block in range(5):
        for with_judge in (False, True):
            p, judge = provider(with_judge)
            agent = ScriptedAgent(p)
            started = time.perf_counter()
            for i in range(turns):
                scenario = SCENARIOS[i % len(SCENARIOS)]
                agent.run(replace(scenario, session_id=f"t{block}-{i}"), end_session=True)
            timings[with_judge].append((time.perf_counter() - started) / turns)
            if judge is not None:
                judge.force_flush(60_000)
            p.shutdown()
    base, judged = statistics.median(timings[False]), statistics.median(timings[True])
    print(f"agent turn wall time ({turns} scripted turns x 5, median):")
    print(f"  without processor  {base * 1e6:8.1f} us/turn")
    print(f"  with processor     {judged * 1e6:8.1f} us/turn")
    print(f"  overhead           {(judged / base - 1) * 100:8.1f} %")


def bench_worker(n_sessions: int) -> None:
    spans = real_spans(n_sessions * 16 // 3)
    engine = Engine()
    started = time.perf_counter()
    records = [span_from_sdk(s) for s in spans]
    converted = time.perf_counter()
    for record in records:
        engine.recognisers.recognise_span(record)
    recognised = time.perf_counter()
    count = Count()
    pipeline = Pipeline(engine, SessionStore(), [count])
    pipeline.add(records)
    grouped = time.perf_counter()
    pipeline.close_all("end_of_input")
    evaluated = time.perf_counter()
    print(f"worker throughput ({len(spans)} spans, {count.n} sessions, default evaluators):")
    print(f"  convert (span_from_sdk)   {len(spans) / (converted - started):10.0f} spans/s")
    print(f"  recognise                 {len(spans) / (recognised - converted):10.0f} spans/s")
    print(f"  group into sessions       {len(spans) / (grouped - recognised):10.0f} spans/s")
    print(f"  evaluate (incl. sinks)    {count.n / (evaluated - grouped):10.0f} sessions/s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--sessions", type=int, default=1_000)
    args = parser.parse_args(argv)
    bench_on_end(args.spans, args.rounds)
    print()
    bench_turns(args.turns)
    print()
    bench_worker(args.sessions)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
