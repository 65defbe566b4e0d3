"""Throughput with the real OpenTelemetry Collector as spanjudge's client, against a baseline.

One run, the same Collector binary (scripts/build-otelcol), the same pre-serialised OTLP/gRPC
requests from a client process, the same receiver and processors as collector-config/sidecar.yaml
(`otlp`, `memory_limiter`, `batch`), two exporters in turn:

- `spanjudge`: the shipped `otlp_grpc/spanjudge` exporter (gzip, sending queue, retry) to a
  `spanjudge serve` sidecar (spool on, deterministic evaluators); done when every session has
  been evaluated.
- `file`: the Collector's `file` exporter; done when the Collector reports every span sent.

    python bench/bench_collector.py [--sessions 10000] [--spans-per-session 6] [--rounds 2]

Fewer spans measure mostly the `batch` processor's 1 s timeout, not throughput.
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
from bench_sidecar import build_requests, drive, sidecar

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "collector-config" / "sidecar.yaml"
READY = b"Everything is ready"


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


def run(args: argparse.Namespace) -> dict[str, Any]:
    binary = otelcol_binary()
    requests = build_requests(args.sessions, args.spans_per_session)
    total = args.sessions * args.spans_per_session
    shipped = yaml.safe_load(SHIPPED.read_text(encoding="utf-8"))["exporters"]
    results: dict[str, Any] = {"spans": total, "sessions": args.sessions}
    with tempfile.TemporaryDirectory() as directory:
        for round_ in range(args.rounds):
            port, telemetry = free_port(), free_port()
            exporter = {"path": os.path.join(directory, f"spans-{round_}.json")}
            file_collector = Collector(
                binary, directory, f"file-{round_}",
                collector_config("file", exporter, port, telemetry),
            )  # fmt: skip
            seconds = drive(
                f"127.0.0.1:{port}", requests, args.clients,
                lambda telemetry=telemetry: sent_spans(telemetry) >= total,  # type: ignore[misc]
            )  # fmt: skip
            file_collector.stop()
            results.setdefault("file", []).append(total / seconds)

            instance = sidecar(True, directory)
            assert instance.grpc is not None
            exporter = dict(shipped["otlp_grpc/spanjudge"])
            exporter["endpoint"] = f"127.0.0.1:{instance.grpc.port}"
            port, telemetry = free_port(), free_port()
            judge_collector = Collector(
                binary, directory, f"spanjudge-{round_}",
                collector_config("otlp_grpc/spanjudge", exporter, port, telemetry),
            )  # fmt: skip
            seconds = drive(
                f"127.0.0.1:{port}", requests, args.clients,
                lambda worker=instance.worker: worker.evaluated_sessions >= args.sessions,  # type: ignore[misc]
            )  # fmt: skip
            judge_collector.stop()
            instance.stop()
            results.setdefault("spanjudge", []).append(total / seconds)
    file_rate = statistics.median(results["file"])
    judge_rate = statistics.median(results["spanjudge"])
    results["median_spans_per_s"] = {"file": round(file_rate), "spanjudge": round(judge_rate)}
    results["ratio_spanjudge_to_file"] = round(judge_rate / file_rate, 3)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=10000)
    parser.add_argument("--spans-per-session", type=int, default=6)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    print(json.dumps(run(parser.parse_args()), indent=2))


if __name__ == "__main__":
    main()
