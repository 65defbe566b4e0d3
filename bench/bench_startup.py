"""Start-up cost of `spanjudge eval` on a small file, against `python -c pass` in the same run.

A release gate runs `spanjudge eval` once per build: on a small file nearly all of its time is
start-up (imports), so the figure is the ratio of the two medians. Target: at most 4x.

    python bench/bench_startup.py             # 15 runs each, interleaved
    python bench/bench_startup.py --runs 30 --input fixtures/adk/adk.jsonl
    python bench/bench_startup.py --importtime   # the 15 slowest imports of one eval run

The command is what the `spanjudge` console script runs (`from spanjudge.cli import main`),
with the report written to a file so the terminal does not count, and with bytecode cached as
after `pip install` (a warm-up run writes it to a private cache). Both wall and CPU time are
reported; on a shared machine the CPU ratio is the steadier one.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_INPUT = ROOT / "fixtures" / "claude_code" / "claude_code.jsonl"  # 13 sessions
CLI = "import sys; from spanjudge.cli import main; sys.exit(main())"


def _time(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child): on a shared machine the CPU time is the
    steadier of the two, since waiting for a core is not counted."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{argv} exited {done.returncode}: {done.stderr.decode()[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def _importtime(eval_argv: list[str], env: dict[str, str]) -> list[tuple[int, str]]:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *eval_argv[1:]],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    rows = []
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            _, cumulative, name = line.split("|", 2)
            if cumulative.strip().isdigit():
                rows.append((int(cumulative), name.rstrip()))
    return sorted(rows, reverse=True)[:15]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--input", default=str(DEFAULT_INPUT))
    parser.add_argument("--importtime", action="store_true", help="show the slowest imports")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        # As installed: pip compiles bytecode at install time, so the warm-up run writes it
        # (to a private cache, whatever PYTHONDONTWRITEBYTECODE says) and later runs load it.
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(PYTHONPATH=str(ROOT / "src"), PYTHONPYCACHEPREFIX=os.path.join(tmp, "pyc"))
        report = os.path.join(tmp, "report.txt")
        eval_argv = [sys.executable, "-c", CLI, "eval", args.input, "-q", "-o", report]
        if args.importtime:
            for micros, name in _importtime(eval_argv, env):
                print(f"{micros / 1000:8.1f} ms  {name}")
            return 0
        baseline_argv = [sys.executable, "-c", "pass"]
        _time(eval_argv, env)  # warm the page cache and the bytecode cache
        baseline, spanjudge = [], []
        for _ in range(args.runs):  # interleaved: both see the same machine load
            baseline.append(_time(baseline_argv, env))
            spanjudge.append(_time(eval_argv, env))
    base_s, eval_s = (statistics.median(w for w, _ in runs) for runs in (baseline, spanjudge))
    base_cpu, eval_cpu = (statistics.median(c for _, c in runs) for runs in (baseline, spanjudge))
    figures = {
        "input": os.path.relpath(args.input, ROOT),
        "input_bytes": os.path.getsize(args.input),
        "runs": args.runs,
        "python_c_pass_median_s": round(base_s, 4),
        "spanjudge_eval_median_s": round(eval_s, 4),
        "ratio": round(eval_s / base_s, 2),
        "python_c_pass_cpu_median_s": round(base_cpu, 4),
        "spanjudge_eval_cpu_median_s": round(eval_cpu, 4),
        "cpu_ratio": round(eval_cpu / base_cpu, 2),
        "target_ratio": 4.0,
    }
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print(
            f"spanjudge eval {figures['input']} ({figures['input_bytes']:,} bytes), {args.runs}"
            f" runs: median wall {eval_s * 1000:.0f} ms, CPU {eval_cpu * 1000:.0f} ms"
        )
        print(f"python -c pass: median wall {base_s * 1000:.0f} ms, CPU {base_cpu * 1000:.0f} ms")
        print(
            f"ratio: wall {figures['ratio']:.2f}x, CPU {figures['cpu_ratio']:.2f}x (target <= 4x)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
