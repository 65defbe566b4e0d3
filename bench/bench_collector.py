"""Throughput and CPU per span with the real OpenTelemetry Collector as spanjudge's client.

One run, the same Collector binary (scripts/build-otelcol), the same pre-serialised OTLP/gRPC
requests from a client process, the same receiver and processors as collector-config/sidecar.yaml
(`otlp`, `memory_limiter`, `batch`), feeding in turn:

- `spanjudge`: the shipped `otlp_grpc/spanjudge` exporter (gzip, sending queue, retry) to a
  `spanjudge serve` process (spool on, deterministic evaluators, verdicts exported over OTLP to a
  receiver in this process), with `serve.workers` 1 and then 2; done when every session's
  evaluation span has arrived.
- `file`: the Collector's `file` exporter; done when the Collector reports every span sent.
- `floor`, the pure-Python floor: the same `otlp_grpc/spanjudge` exporter configuration to
  `bench/floor_receiver.py`, a Python OTLP/gRPC receiver in its own process set up as serve's
  (a generic handler on raw bytes, a thread pool of serve's `grpc_workers`) that for each
  request (gzip undone by gRPC, as for serve) parses the body with the protobuf runtime
  spanjudge uses, reads every span's ids, name, times, every attribute key and value and its
  events' attributes (and the resource's attributes) into a plain dict, counts the spans and
  answers with an empty response: what any Python sidecar must do before judging anything. It
  keeps nothing past its request: no spool, no sessions, no recognition or evaluation, no
  verdicts built or exported.
  Done when it has counted every span (asked over a pipe 20 times a second).

Each round runs `file`, `floor`, then serve with each of ``--workers``. Printed from the same
run (medians over ``--rounds``):

- spans/s of each pipeline, and spanjudge's over the file pipeline's;
- CPU per span (user + system, from /proc): the file pipeline's Collector, and serve's processes
  (the main process and each evaluation process); serve's total over the Collector's
  (goal: at most 5x); workers 2 over workers 1, total CPU per span (goal: at most 1.1x); and the
  main process's share with workers 2 (goal: at most a quarter);
- the floor: its receiver's CPU per span (and the Collector's in that round), its ratio to the
  file pipeline's Collector CPU per span, and its share of serve's CPU per span with workers 1
  (how much of serve's cost any Python receiver pays, whatever it then does);
- the budget: what 5x the file pipeline's CPU per span leaves once the floor has read the spans
  and the values serve keeps are built (`kept_values.py`: each span's record, each session's
  steps, turns, verdicts, trajectory, coverage and result, built again from their fields in this
  process for 600 of the bench's sessions), and what serve at workers 1 spends beyond those two.

    python bench/bench_collector.py [--sessions 10000] [--spans-per-session 6] [--rounds 2]
        [--workers 1 2] [--profile DIR]

``--profile DIR`` records each serve process with py-spy (`pip install py-spy`; not a project
dependency) into DIR as speedscope files; py-spy takes CPU of its own, so quote ratios from a run
without it. Fewer spans measure mostly the `batch` processor's 1 s timeout, not throughput.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import multiprocessing
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml
from bench_sidecar import build_requests, drive
from bench_sidecar_load import (
    _floor_server,
    _start_serve,
    _stop_serve,
    cpu_seconds,
    serve_settings,
    verdict_server,
)
from kept_values import build_seconds

from spanjudge.engine import Engine
from spanjudge.sessions.store import ClosedSession
from spanjudge.spans.limits import Limits
from spanjudge.spans.otlp_proto import decode_request, parse_request

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "collector-config" / "sidecar.yaml"
READY = b"Everything is ready"
# How often the file round asks the Collector how many spans it delivered (its /metrics). Each
# answer costs the Collector CPU: asked every millisecond while the `batch` processor held the
# last spans for its one-second timeout, the answers cost it more than 36,000 spans did (14-16
# µs a span in all against 6). The round's duration is known to within this.
_ASK_COLLECTOR_S = 0.05
# How often the floor round asks its receiver how many spans it counted (each answer wakes it).
_ASK_FLOOR_S = 0.05


def otelcol_binary() -> str:
    path = os.environ.get("SPANJUDGE_OTELCOL")
    if not path:
        found = subprocess.run(
            [str(ROOT / "scripts" / "build-otelcol"), "--cached"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if found.returncode != 0:
            sys.exit("bench_collector: no Collector built; run scripts/build-otelcol first")
        path = found.stdout.strip().splitlines()[-1]
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def collector_config(exporter_id: str, exporter: dict[str, Any], port: int, telemetry: int) -> Any:
    shipped = yaml.safe_load(SHIPPED.read_text(encoding="utf-8"))
    return {
        "receivers": {"otlp": {"protocols": {"grpc": {"endpoint": f"127.0.0.1:{port}"}}}},
        "processors": shipped["processors"],
        "exporters": {exporter_id: exporter},
        "service": {
            "pipelines": {
                "traces": {
                    "receivers": ["otlp"],
                    "processors": shipped["service"]["pipelines"]["traces/agents"]["processors"],
                    "exporters": [exporter_id],
                }
            },
            "telemetry": {
                "metrics": {
                    "level": "normal",
                    "readers": [
                        {
                            "pull": {
                                "exporter": {"prometheus": {"host": "127.0.0.1", "port": telemetry}}
                            }
                        }
                    ],
                },
            },
        },
    }


class Collector:
    def __init__(self, binary: str, directory: str, name: str, config: Any) -> None:
        path = Path(directory) / f"{name}.yaml"
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        self.log = Path(directory) / f"{name}.log"
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [binary, f"--config={path}"],
                stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        deadline = time.monotonic() + 60
        while READY not in self.log.read_bytes():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"bench_collector: Collector did not start:\n{self.log.read_text()}")
            time.sleep(0.05)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


def shipped_exporter(endpoint: str) -> dict[str, Any]:
    """The shipped `otlp_grpc/spanjudge` exporter (gzip, sending queue, retry) to ``endpoint``."""
    shipped = yaml.safe_load(SHIPPED.read_text(encoding="utf-8"))
    exporter = dict(shipped["exporters"]["otlp_grpc/spanjudge"])
    exporter["endpoint"] = endpoint
    return exporter


class FloorReceiver:
    """`bench_sidecar_load._floor_server` in a process of its own, with serve's gRPC thread pool
    and request size limit; asked for its span count over a pipe."""

    def __init__(self) -> None:
        context = multiprocessing.get_context("spawn")  # no fork() under a live gRPC runtime
        self._conn, child = context.Pipe()
        self.proc = context.Process(target=_floor_server, args=(child,))
        self.proc.start()
        child.close()
        self.endpoint = f"127.0.0.1:{self._answer()}"  # its port, sent first

    def counted(self) -> int:
        with contextlib.suppress(OSError):  # a receiver gone shows as the answer that never comes
            self._conn.send("count")
        return self._answer()

    def _answer(self) -> int:
        try:
            return int(self._conn.recv())
        except (EOFError, OSError):
            self.proc.join(30)
            sys.exit(f"bench_collector: the floor receiver exited ({self.proc.exitcode})")

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self._conn.send("stop")
        self.proc.join(30)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()
        self._conn.close()


def sent_spans(telemetry: int) -> float:
    """The Collector's own count of spans its exporter delivered."""
    url = f"http://127.0.0.1:{telemetry}/metrics"
    with urllib.request.urlopen(url, timeout=5) as answer:
        text = answer.read().decode()
    found = re.findall(r"^otelcol_exporter_sent_spans(?:_total)?\{[^}]*\} (\S+)$", text, re.M)
    return sum(float(v) for v in found)


def file_round(binary: str, directory: str, name: str, args: argparse.Namespace,
               requests: list[bytes]) -> dict[str, float]:  # fmt: skip
    """The Collector with its `file` exporter: spans/s and the Collector's CPU per span."""
    total = args.sessions * args.spans_per_session
    port, telemetry = free_port(), free_port()
    exporter = {"path": os.path.join(directory, f"{name}.json")}
    collector = Collector(
        binary, directory, name, collector_config("file", exporter, port, telemetry)
    )
    try:
        before = cpu_seconds(collector.proc.pid)
        seconds = drive(
            f"127.0.0.1:{port}", requests, args.clients,
            lambda: sent_spans(telemetry) >= total, poll_s=_ASK_COLLECTOR_S,
        )  # fmt: skip
        cpu = cpu_seconds(collector.proc.pid) - before
    finally:
        collector.stop()
    return {"spans_per_s": total / seconds, "cpu_us_per_span": 1e6 * cpu / total}


def floor_round(binary: str, directory: str, name: str, args: argparse.Namespace,
                requests: list[bytes]) -> dict[str, float]:  # fmt: skip
    """The Collector with the shipped exporter in front of the floor receiver: spans/s, the
    receiver's CPU per span and the Collector's."""
    total = args.sessions * args.spans_per_session
    floor = FloorReceiver()
    try:
        port, telemetry = free_port(), free_port()
        collector = Collector(
            binary, directory, name,
            collector_config(
                "otlp_grpc/spanjudge", shipped_exporter(floor.endpoint), port, telemetry
            ),
        )  # fmt: skip
        try:
            before = cpu_seconds(floor.proc.pid)
            collector_before = cpu_seconds(collector.proc.pid)
            seconds = drive(
                f"127.0.0.1:{port}", requests, args.clients,
                lambda: floor.counted() >= total, poll_s=_ASK_FLOOR_S,
            )  # fmt: skip
            cpu = cpu_seconds(floor.proc.pid) - before
            collector_cpu = cpu_seconds(collector.proc.pid) - collector_before
        finally:
            collector.stop()
    finally:
        floor.stop()
    return {
        "spans_per_s": total / seconds,
        "cpu_us_per_span": 1e6 * cpu / total,
        "collector_cpu_us_per_span": 1e6 * collector_cpu / total,
    }


def serve_round(binary: str, directory: str, name: str, workers: int,
                args: argparse.Namespace, requests: list[bytes]) -> dict[str, Any]:  # fmt: skip
    """The Collector in front of `spanjudge serve` with ``workers``: spans/s, serve's CPU per
    span by process (the main process first) and the Collector's."""
    total = args.sessions * args.spans_per_session
    server, verdict_port, received = verdict_server()
    settings = serve_settings(workers, Path(directory) / f"{name}.db", verdict_port)
    proc, endpoints, log = _start_serve(settings, directory, name)
    profiler = None
    try:
        pids = [proc.pid, *endpoints.get("workers", [])]
        exporter = shipped_exporter(endpoints["grpc"])
        port, telemetry = free_port(), free_port()
        collector = Collector(
            binary, directory, name,
            collector_config("otlp_grpc/spanjudge", exporter, port, telemetry),
        )  # fmt: skip
        if args.profile:
            out = Path(args.profile) / f"{name}.speedscope.json"
            out.parent.mkdir(parents=True, exist_ok=True)
            profiler = subprocess.Popen(
                ["py-spy", "record", "--format", "speedscope", "--subprocesses",
                 "--rate", "200", "--pid", str(proc.pid), "--output", str(out)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            time.sleep(1.0)  # py-spy attached
        try:
            before = [cpu_seconds(pid) for pid in pids]
            collector_before = cpu_seconds(collector.proc.pid)

            def judged() -> bool:
                with received.lock:
                    return len(received.spans) >= args.sessions

            seconds = drive(f"127.0.0.1:{port}", requests, args.clients, judged)
            cpu = [cpu_seconds(pid) - b for pid, b in zip(pids, before, strict=True)]
            collector_cpu = cpu_seconds(collector.proc.pid) - collector_before
        finally:
            collector.stop()
    finally:
        if profiler is not None:
            profiler.send_signal(2)  # SIGINT: py-spy writes its file
            profiler.wait(60)
        _stop_serve(proc, log, 60)
        server.stop(0)
    return {
        "workers": workers,
        "spans_per_s": total / seconds,
        "cpu_us_per_span": 1e6 * sum(cpu) / total,
        "cpu_us_per_span_by_process": [1e6 * c / total for c in cpu],
        "collector_cpu_us_per_span": 1e6 * collector_cpu / total,
    }


def values_cost(sessions: int, spans_per_session: int) -> float:
    """CPU µs per span to build the values serve keeps for ``sessions`` of the bench's
    sessions (`kept_values`), each trace judged as one session (each of the bench's sessions
    is one trace)."""
    records = [
        record
        for body in build_requests(sessions, spans_per_session)
        for record in decode_request(parse_request(body), Limits())[0]
    ]
    by_trace: dict[str, list[Any]] = collections.defaultdict(list)
    for record in records:
        by_trace[record.trace_id].append(record)
    engine = Engine()
    results = [
        engine.evaluate(
            ClosedSession(
                key=trace_id, key_source="trace", revision=1, reason="idle", spans=tuple(spans)
            )
        )
        for trace_id, spans in by_trace.items()
    ]
    return build_seconds(records, results) / len(records) * 1e6


def run(args: argparse.Namespace) -> dict[str, Any]:
    binary = otelcol_binary()
    requests = build_requests(args.sessions, args.spans_per_session)
    results: dict[str, Any] = {
        "spans": args.sessions * args.spans_per_session,
        "sessions": args.sessions,
    }
    rounds: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as directory:
        for round_ in range(args.rounds):
            rounds.setdefault("file", []).append(
                file_round(binary, directory, f"file-{round_}", args, requests)
            )
            rounds.setdefault("floor", []).append(
                floor_round(binary, directory, f"floor-{round_}", args, requests)
            )
            for workers in args.workers:
                rounds.setdefault(f"workers_{workers}", []).append(
                    serve_round(
                        binary, directory, f"serve-{workers}-{round_}", workers, args, requests
                    )
                )

    def median(name: str, key: str) -> float:
        return statistics.median(r[key] for r in rounds[name])

    file_cpu = median("file", "cpu_us_per_span")
    results["file"] = {
        "spans_per_s": round(median("file", "spans_per_s")),
        "cpu_us_per_span": round(file_cpu, 2),
    }
    floor_cpu = median("floor", "cpu_us_per_span")
    results["floor"] = {
        "spans_per_s": round(median("floor", "spans_per_s")),
        # the receiver's process; the Collector's in the same round beside it
        "cpu_us_per_span": round(floor_cpu, 2),
        "collector_cpu_us_per_span": round(median("floor", "collector_cpu_us_per_span"), 2),
        "ratio_cpu_per_span_vs_file": round(floor_cpu / file_cpu, 2),
    }
    for workers in args.workers:
        name = f"workers_{workers}"
        by_process = [
            statistics.median(r["cpu_us_per_span_by_process"][i] for r in rounds[name])
            for i in range(workers + (1 if workers > 1 else 0))
        ]
        total_cpu = median(name, "cpu_us_per_span")
        results[name] = {
            "spans_per_s": round(median(name, "spans_per_s")),
            "ratio_spans_per_s_vs_file": round(
                median(name, "spans_per_s") / median("file", "spans_per_s"), 3
            ),
            # serve's processes: the main one, then each evaluation process
            "cpu_us_per_span": round(total_cpu, 1),
            "cpu_us_per_span_by_process": [round(c, 1) for c in by_process],
            "main_process_share": round(by_process[0] / total_cpu, 3),
            "collector_cpu_us_per_span": round(median(name, "collector_cpu_us_per_span"), 2),
            "ratio_cpu_per_span_vs_file": round(total_cpu / file_cpu, 1),
            "goal_ratio_cpu_per_span_vs_file": "<= 5",
        }
    if 1 in args.workers:  # how much of serve's CPU per span any Python receiver pays
        results["floor"]["share_of_workers_1_cpu_per_span"] = round(
            floor_cpu / median("workers_1", "cpu_us_per_span"), 3
        )
    if 1 in args.workers and 2 in args.workers:
        results["ratio_cpu_per_span_workers_2_vs_1"] = round(
            median("workers_2", "cpu_us_per_span") / median("workers_1", "cpu_us_per_span"), 3
        )
        results["goal_ratio_workers_2_vs_1"] = "<= 1.1, main process share <= 0.25"
    # What 5x the file pipeline leaves once any Python receiver has read the spans (the floor)
    # and the values serve keeps are built, at this machine's speed.
    values = values_cost(min(args.sessions, 600), args.spans_per_session)
    goal = 5 * file_cpu
    results["budget"] = {
        "goal_cpu_us_per_span": round(goal, 2),
        "floor_cpu_us_per_span": round(floor_cpu, 2),
        "values_cpu_us_per_span": round(values, 2),
        "left_cpu_us_per_span": round(goal - floor_cpu - values, 2),
    }
    if 1 in args.workers:
        results["budget"]["workers_1_beyond_floor_and_values_cpu_us_per_span"] = round(
            median("workers_1", "cpu_us_per_span") - floor_cpu - values, 2
        )
    results["rounds"] = rounds
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=10000)
    parser.add_argument("--spans-per-session", type=int, default=6)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--profile", metavar="DIR", help="record serve's processes with py-spy")
    print(json.dumps(run(parser.parse_args()), indent=2))


if __name__ == "__main__":
    main()
