"""The session store's memory budget against the memory it stands for, and what the estimate costs.

    python bench/bench_memory_budget.py [--repeats 5]

1. Bytes really held (tracemalloc, records decoded inside the measured window) against the
   store's estimate (`SessionStore.memory_bytes`): every fixture span in open sessions; synthetic
   sessions of 3 and 27 spans (bench_sidecar's shape: per retained span and per open session);
   key-less traces; and the spans kept for closed sessions. Goal: real / estimate within 1.3x.
   (bench/bench_sidecar_load.py measures the process's RSS against the same estimate.)
2. `estimate_size` per span against the previous estimate (a Python loop over string lengths,
   kept below), same spans, same run. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_sidecar import build_requests
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)

from spanjudge.config import parse_config
from spanjudge.sessions.store import ClosePolicy, SessionStore, estimate_size
from spanjudge.spans.files import read_input
from spanjudge.spans.otlp_proto import decode_request
from spanjudge.spans.record import SpanRecord

ROOT = Path(__file__).resolve().parents[1]
FILES = sorted((ROOT / "fixtures").glob("*/*.jsonl"))


def previous_estimate(span: SpanRecord) -> int:
    """The estimate before: 1.5-1.9x under the real figure."""
    size = 400
    for key, value in span.attributes.items():
        size += 64 + len(key) + (len(value) if isinstance(value, str) else 16)
    for event in span.events:
        size += 120
        for key, value in event.attributes.items():
            size += 64 + len(key) + (len(value) if isinstance(value, str) else 16)
    return size


def traced(fill: Callable[[SessionStore], None], policy: ClosePolicy) -> tuple[int, SessionStore]:
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    store = SessionStore(policy)
    fill(store)
    gc.collect()
    real = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return real, store


def _fixtures(store: SessionStore) -> None:
    limits = parse_config({}).limits
    for path in FILES:
        for chunk in read_input(str(path), limits, lambda error: None):
            store.add_all(chunk.spans)


def _synthetic(sessions: int, spans: int, keyless: bool = False) -> Callable[[SessionStore], None]:
    bodies = [ExportTraceServiceRequest.FromString(b) for b in build_requests(sessions, spans)]

    def fill(store: SessionStore) -> None:
        for request in bodies:
            if keyless:  # the same spans without their session key
                for rs in request.resource_spans:
                    for ss in rs.scope_spans:
                        for s in ss.spans:
                            kept = [kv for kv in s.attributes if kv.key != "session.id"]
                            del s.attributes[:]
                            s.attributes.extend(kept)
            records, _ = decode_request(request)
            store.add_all(records)

    return fill


def memory() -> None:
    open_policy = ClosePolicy(idle_timeout_s=1e9, max_age_s=None)
    real, store = traced(_fixtures, open_policy)
    print(
        f"fixture spans, open sessions: real {real / 1e6:.1f} MB, estimate"
        f" {store.memory_bytes / 1e6:.1f} MB: {real / store.memory_bytes:.2f}x"
    )
    n = 2000
    r3, s3 = traced(_synthetic(n, 3), open_policy)
    r27, s27 = traced(_synthetic(n, 27), open_policy)
    per_span = (r27 - r3) / (n * 24)
    est_span = (s27.memory_bytes - s3.memory_bytes) / (n * 24)
    print(
        f"synthetic, per retained span: real {per_span:.0f} B, estimate {est_span:.0f} B:"
        f" {per_span / est_span:.2f}x; per open session of 3 spans: real {r3 / n:.0f} B,"
        f" estimate {s3.memory_bytes / n:.0f} B: {r3 / s3.memory_bytes:.2f}x"
    )
    rk, sk = traced(_synthetic(n, 6, keyless=True), open_policy)
    print(
        f"key-less traces ({len(sk._pending)}): real {rk / 1e6:.1f} MB, estimate"
        f" {sk.memory_bytes / 1e6:.1f} MB: {rk / max(1, sk.memory_bytes):.2f}x"
    )

    def closed(store: SessionStore) -> None:
        _synthetic(n, 6)(store)
        store.close("end_of_input")

    rc, sc = traced(closed, ClosePolicy(keep_closed_sessions=n))
    print(
        f"spans kept for {len(sc._closed_spans)} closed sessions: real {rc / 1e6:.1f} MB,"
        f" estimate {sc.memory_bytes / 1e6:.1f} MB: {rc / max(1, sc.memory_bytes):.2f}x"
    )


def cost(repeats: int) -> None:
    spans: list[SpanRecord] = []
    limits = parse_config({}).limits
    for path in FILES:
        for chunk in read_input(str(path), limits, lambda error: None):
            spans.extend(chunk.spans)
    best = {"previous": float("inf"), "now": float("inf")}
    for _ in range(repeats):
        for name, fn in (("previous", previous_estimate), ("now", estimate_size)):
            start = time.perf_counter()
            for _ in range(5):
                for span in spans:
                    fn(span)
            best[name] = min(best[name], (time.perf_counter() - start) / (5 * len(spans)))
    print(
        f"estimate_size over {len(spans)} fixture spans: {best['now'] * 1e9:.0f} ns/span, previous"
        f" {best['previous'] * 1e9:.0f} ns/span: {best['previous'] / best['now']:.2f}x cheaper"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    memory()
    cost(args.repeats)


if __name__ == "__main__":
    main()
