"""Where `spanjudge serve`'s time goes: py-spy speedscope files split per process and per stage.

Reads the files `bench_collector.py --profile DIR` writes (py-spy's ``--subprocesses``: one
profile per thread, named after its process) and prints, per process, the share of its sampled
CPU in each stage of the sidecar, and each process's share of all samples.

    python bench/profile_split.py DIR/serve-2-0.speedscope.json [...]

A sample's stage is the first of its frames, from the thread's root to the running function,
that names one (the entry points below); a sample with none falls to the first fallback that
matches, else to "other". Samples of a thread blocked waiting (its running frame one of IDLE)
are left out. Quote the split within a process; each process's share of the CPU is what
`bench_collector.py` measures from /proc.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
from pathlib import Path

# (stage, pattern on "function file") in the order they are looked for along a stack
STAGES = [
    ("receive: decode OTLP", r"^decode_body |^decode_heads |/spanjudge/spans/"),
    ("spool", r"/spanjudge/sidecar/spool\.py|^Spool\.|sqlite3"),
    (
        "routing to evaluation processes",
        r"/spanjudge/sidecar/routing\.py|^Shards\._feed |^_feed |^payload ",
    ),
    ("session store", r"/spanjudge/sessions/"),
    ("recognition", r"/spanjudge/recognition/"),
    ("assembly", r"/spanjudge/trajectory/"),
    ("evaluation", r"^Engine\.begin |^Engine\._run |/spanjudge/evaluators/"),
    ("emit: span and log records (SDK)", r"^OtelVerdictSink\.emit "),
    ("export: OTLP encode and send", r"^OtelVerdictSink\.flush "),
    ("emit: encode OTLP span and log records", r"^OtlpVerdictSink\.emit "),
    ("export: OTLP requests sent", r"^OtlpVerdictSink\.flush "),
    (
        "metrics",
        r"^MetricsSink\.|/opentelemetry/sdk/metrics/|/opentelemetry/exporter/prometheus|"
        r"^replay_telemetry ",
    ),
    ("results to the main process", r"^_ForwardSink\."),
]
# a thread blocked in C (py-spy counts some of those as active): the running function's frame
IDLE = re.compile(
    r"^(_worker|_PollLikeSelector\.select|Condition\.wait|Event\.wait|StopSignals\.wait|"
    r"ShardedWorker\._feed|_serve [^ ]*grpc/_server\.py|sleep|select|poll) "
)
FALLBACKS = [
    ("pipe between processes (pickle)", r"/multiprocessing/"),
    ("receive: gRPC server", r"/grpc/"),
]


def _stage(names: list[str], thread: str) -> str:
    for name in names:  # from the root
        for stage, pattern in STAGES:
            if re.search(pattern, name):
                return stage
    for stage, pattern in FALLBACKS:
        if any(re.search(pattern, name) for name in names):
            return stage
    return "metrics" if "MetricReader" in thread else "other"


def split(path: Path) -> dict[str, collections.Counter[str]]:
    data = json.loads(path.read_text())
    frames = [f"{f['name']} {f.get('file', '')}" for f in data["shared"]["frames"]]
    by_process: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for profile in data["profiles"]:
        match = re.match(r"Process (\d+) Thread \d+ \"?([^\"]*)", profile["name"])
        process, thread = (match.group(1), match.group(2)) if match else ("?", profile["name"])
        for sample, weight in zip(profile["samples"], profile["weights"], strict=True):
            names = [frames[i] for i in sample]
            if IDLE.match(names[-1]):
                continue
            # py-spy names a child's samples after the process it followed (serve)
            root = re.match(r"process (\d+)", names[0])
            kind = "main process" if root and root.group(1) == process else "evaluation process"
            by_process[f"{kind} {process}"][_stage(names, thread)] += weight
    return by_process


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path)
    args = parser.parse_args()
    for path in args.files:
        by_process = split(path)
        total = sum(sum(c.values()) for c in by_process.values())
        print(f"{path.name}: {total:.1f} s sampled")
        for process, counts in sorted(by_process.items()):
            seconds = sum(counts.values())
            print(f"  {process}: {100 * seconds / total:.0f}% of all samples")
            for stage, value in counts.most_common():
                print(f"    {100 * value / seconds:5.1f}%  {stage}")


if __name__ == "__main__":
    main()
