"""Throughput and CPU per span with the real OpenTelemetry Collector as spanjudge's client.

One run, the same Collector binary (scripts/build-otelcol), the same pre-serialised OTLP/gRPC
requests from a client process, the same receiver and processors as collector-config/sidecar.yaml
(`otlp`, `memory_limiter`, `batch`), two exporters in turn:

- `spanjudge`: the shipped `otlp_grpc/spanjudge` exporter (gzip, sending queue, retry) to a
  `spanjudge serve` process (spool on, deterministic evaluators, verdicts exported over OTLP to a
  receiver in this process), with `serve.workers` 1 and then 2; done when every session's
  evaluation span has arrived.
- `file`: the Collector's `file` exporter; done when the Collector reports every span sent.

Printed from the same run (medians over ``--rounds``):

- spans/s of each pipeline, and spanjudge's over the file pipeline's;
- CPU per span (user + system, from /proc): the file pipeline's Collector, and serve's processes
  (the main process and each evaluation process); serve's total over the Collector's
  (goal: at most 5x); workers 2 over workers 1, total CPU per span (goal: at most 1.1x); and the
  main process's share with workers 2 (goal: at most a quarter).

    python bench/bench_collector.py [--sessions 10000] [--spans-per-session 6] [--rounds 2]
        [--workers 1 2] [--profile DIR]

``--profile DIR`` records each serve process with py-spy (`pip install py-spy`; not a project
dependency) into DIR as speedscope files; py-spy takes CPU of its own, so quote ratios from a run
without it. Fewer spans measure mostly the `batch` processor's 1 s timeout, not throughput.
"""

from __future__ import annotations

import argparse
import json
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
    _start_serve,
    _stop_serve,
    cpu_seconds,
    serve_settings,
    verdict_server,
)

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "collector-config" / "sidecar.yaml"
READY = b"Everything is ready"
# How often the file round asks the Collector how many spans it delivered (its /metrics). Each
# answer costs the Collector CPU: asked every millisecond while the `batch` processor held the
# last spans for its one-second timeout, the answers cost it more than 36,000 spans did (14-16
# µs a span in all against 6). The round's duration is known to within this.
_ASK_COLLECTOR_S = 0.05


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
        exporter = dict(
            yaml.safe_load(SHIPPED.read_text(encoding="utf-8"))["exporters"]["otlp_grpc/spanjudge"]
        )
        exporter["endpoint"] = endpoints["grpc"]
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
    if 1 in args.workers and 2 in args.workers:
        results["ratio_cpu_per_span_workers_2_vs_1"] = round(
            median("workers_2", "cpu_us_per_span") / median("workers_1", "cpu_us_per_span"), 3
        )
        results["goal_ratio_workers_2_vs_1"] = "<= 1.1, main process share <= 0.25"
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
