"""Start-up cost of `spanjudge eval` on a small file, against `python -c pass` in the same run.

A release gate runs `spanjudge eval` once per build: on a small file nearly all of its time is
start-up (imports), so the figure is the ratio of the two medians. Target: at most 4x.

    python bench/bench_startup.py             # 15 runs each, interleaved, in both interpreters
    python bench/bench_startup.py --runs 30 --input fixtures/adk/adk.jsonl
    python bench/bench_startup.py --only venv --importtime   # the 15 slowest imports of one run
    python bench/bench_startup.py --only venv --against ../main   # and another checkout's venv

Two interpreters are measured, each against its own `python -c pass`:

- ``current``: this interpreter with this checkout's `src/` first on `PYTHONPATH` (whatever else
  its site-packages hold, as in a developer's environment);
- ``venv``: a fresh virtual environment, made in a temporary directory, holding what
  `pip install .` gives a newcomer: this checkout's package (copied, compiled and given its
  `.dist-info` with the console script, as pip installs a wheel) and the distributions it depends
  on, linked file by file from this interpreter's environment (so it runs offline). A small
  `python -c pass` there makes the ratio the harder one to meet.

``--against CHECKOUT`` builds a second fresh venv from another checkout (an older commit, say)
and runs its eval in the same interleaved loop, so the two trees' figures share one machine
load: a before/after comparison that does not depend on when each was measured.

The command is the `spanjudge` console script as pip writes it for this checkout's
`[project.scripts]` entry (`console_script`: in the venv it is `bin/spanjudge`), run by that
interpreter, with the report written to a file so the terminal does not count, and with
bytecode cached as after `pip install` (a warm-up run writes it to a private cache). Both wall
and CPU time are reported; on a shared machine the CPU ratio is the steadier one.
"""

from __future__ import annotations

import argparse
import compileall
import importlib.metadata as metadata
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
import venv
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_INPUT = ROOT / "fixtures" / "claude_code" / "claude_code.jsonl"  # 13 sessions


def console_script(root: Path = ROOT) -> str:
    """The text of the `spanjudge` script pip writes for ``[project.scripts]`` (pip's own
    template: it imports `re` and `sys`, then the entry point named in pyproject.toml)."""
    scripts = tomllib.loads((root / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, function = scripts["spanjudge"].partition(":")
    return (
        "# -*- coding: utf-8 -*-\n"
        "import re\n"
        "import sys\n"
        f"from {module} import {function}\n"
        "if __name__ == '__main__':\n"
        "    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])\n"
        f"    sys.exit({function}())\n"
    )


CLI = console_script()
TARGET = 4.0


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


# `-X importtime` sees imports through `import`, not `importlib.import_module` (how registries load
# evaluators and recognisers): for the listing, route the latter through the former.
IMPORTTIME_PATCH = (
    "import importlib, sys; importlib.import_module = "
    "lambda name, package=None: (__import__(name), sys.modules[name])[1]; "
)


def _importtime(eval_argv: list[str], env: dict[str, str]) -> dict[str, object]:
    script = f"{IMPORTTIME_PATCH}exec(compile(open({eval_argv[1]!r}).read(), 'spanjudge', 'exec'))"
    argv = [eval_argv[0], "-X", "importtime", "-c", script, *eval_argv[2:]]
    done = subprocess.run(
        argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    rows, own, other = [], 0, 0
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            self_us, cumulative, name = line[len("import time:") :].split("|", 2)
            if cumulative.strip().isdigit():
                rows.append((int(cumulative), name.rstrip()))
                if name.strip().startswith("spanjudge"):
                    own += int(self_us)
                else:
                    other += int(self_us)
    return {"slowest": sorted(rows, reverse=True)[:15], "spanjudge_self_us": own, "other_us": other}


# --- the fresh virtual environment -----------------------------------------------------------


def _requirement_name(spec: str) -> str | None:
    """The distribution a requirement names, or None when only an extra or another platform
    or Python needs it (a marker that is not met)."""
    name, _, marker = spec.partition(";")
    if marker.strip():
        try:
            from packaging.markers import Marker

            if not Marker(marker).evaluate({"extra": ""}):
                return None
        except ImportError:  # without packaging: leave out what an extra asks for
            if "extra" in marker:
                return None
    found = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", name)
    return found.group(1) if found else None


def _dependencies(root: Path = ROOT) -> list[metadata.Distribution]:
    """A checkout's dependencies (pyproject.toml) and theirs, as installed here."""
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    todo = [n for n in map(_requirement_name, project["dependencies"]) if n]
    found: dict[str, metadata.Distribution] = {}
    while todo:
        name = todo.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in found:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            raise SystemExit(f"{name} (a dependency of spanjudge) is not installed here") from None
        found[key] = dist
        todo.extend(n for n in map(_requirement_name, dist.requires or []) if n)
    return list(found.values())


def _install_tree(site: Path, root: Path = ROOT) -> None:
    """What pip installs from a checkout's wheel: the package, compiled, and its dist-info
    (with the console script's entry point, which the plugin scan reads like any other)."""
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    package = site / "spanjudge"
    shutil.copytree(
        root / "src" / "spanjudge", package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    compileall.compile_dir(package, quiet=1)
    info = site / f"spanjudge-{project['version']}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: spanjudge\nVersion: {project['version']}\n"
        + "".join(f"Requires-Dist: {spec}\n" for spec in project["dependencies"])
    )
    scripts = "".join(f"{k} = {v}\n" for k, v in project.get("scripts", {}).items())
    (info / "entry_points.txt").write_text(f"[console_scripts]\n{scripts}")
    (info / "INSTALLER").write_text("bench_startup\n")
    (info / "RECORD").write_text("")


def make_venv(directory: Path, root: Path = ROOT) -> Path:
    """A fresh venv (with pip, as `python -m venv` makes it) holding the spanjudge of checkout
    ``root`` and its dependencies only, and pip's `bin/spanjudge` script; returns its python."""
    venv.create(directory, with_pip=True, symlinks=True)
    python = directory / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    site = Path(purelib)
    here = Path(sysconfig.get_paths()["purelib"])
    for dist in _dependencies(root):
        for file in dist.files or ():
            if file.parts[0] == ".." or "__pycache__" in file.parts:
                continue  # scripts live outside site-packages; bytecode is cached per run
            source = Path(dist.locate_file(file))
            if not source.is_file():
                continue
            try:
                target = site / source.relative_to(here)
            except ValueError:
                target = site / file
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.exists():
                target.symlink_to(source)
    _install_tree(site, root)
    script = directory / "bin" / "spanjudge"
    script.write_text(f"#!{python}\n{console_script(root)}")
    script.chmod(0o755)
    return python


# --- measuring -------------------------------------------------------------------------------


def _figures(baseline: list[tuple[float, float]], spanjudge: list[tuple[float, float]]) -> dict:
    base_s, eval_s = (statistics.median(w for w, _ in runs) for runs in (baseline, spanjudge))
    base_cpu, eval_cpu = (statistics.median(c for _, c in runs) for runs in (baseline, spanjudge))
    return {
        "python_c_pass_median_s": round(base_s, 4),
        "spanjudge_eval_median_s": round(eval_s, 4),
        "ratio": round(eval_s / base_s, 2),
        "python_c_pass_cpu_median_s": round(base_cpu, 4),
        "spanjudge_eval_cpu_median_s": round(eval_cpu, 4),
        "cpu_ratio": round(eval_cpu / base_cpu, 2),
        # The fastest run of each: what is left when the shared machine's noise is least.
        "cpu_min_ratio": round(min(c for _, c in spanjudge) / min(c for _, c in baseline), 2),
    }


def measure(
    python: str,
    script: str,
    env: dict[str, str],
    args: argparse.Namespace,
    tmp: str,
    against: tuple[str, str] | None = None,
) -> dict:
    """Figures of ``script``'s eval against ``python -c pass``; with ``against`` (another
    venv's python and script), that eval's too, in the same interleaved loop."""
    report = os.path.join(tmp, "report.txt")
    evals = [[python, script, "eval", args.input, "-q", "-o", report]]
    if against is not None:
        evals.append([*against, "eval", args.input, "-q", "-o", report])
    baseline_argv = [python, "-c", "pass"]
    if args.importtime:
        _time(evals[0], env)
        return {"importtime": _importtime(evals[0], env)}
    for argv in evals:
        _time(argv, env)  # warm the page cache and the bytecode cache
    baseline: list[tuple[float, float]] = []
    runs: list[list[tuple[float, float]]] = [[] for _ in evals]
    for _ in range(args.runs):  # interleaved: all see the same machine load
        baseline.append(_time(baseline_argv, env))
        for argv, times in zip(evals, runs, strict=True):
            times.append(_time(argv, env))
    figures = _figures(baseline, runs[0])
    if against is not None:
        figures["against"] = _figures(baseline, runs[1])
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--input", default=str(DEFAULT_INPUT))
    parser.add_argument(
        "--only", choices=("current", "venv"), help="measure one interpreter (default: both)"
    )
    parser.add_argument("--importtime", action="store_true", help="show the slowest imports")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--against",
        metavar="CHECKOUT",
        type=Path,
        help="also measure another checkout's fresh venv in the same runs (e.g. an older commit)",
    )
    args = parser.parse_args()
    figures: dict = {
        "input": os.path.relpath(args.input, ROOT),
        "input_bytes": os.path.getsize(args.input),
        "runs": args.runs,
        "target_ratio": TARGET,
    }
    with tempfile.TemporaryDirectory() as tmp:
        # As installed: pip compiles bytecode at install time, so the warm-up run writes it
        # (to a private cache, whatever PYTHONDONTWRITEBYTECODE says) and later runs load it.
        base_env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH", "PYTHONHOME")
        }
        base_env["PYTHONPYCACHEPREFIX"] = os.path.join(tmp, "pyc")
        targets: list[tuple[str, str, str, dict[str, str]]] = []
        if args.only in (None, "current"):
            script = Path(tmp) / "spanjudge"
            script.write_text(CLI)
            env = {**base_env, "PYTHONPATH": str(ROOT / "src")}
            targets.append(("current", sys.executable, str(script), env))
        against = None
        if args.only in (None, "venv"):
            python = make_venv(Path(tmp) / "venv")
            targets.append(("venv", str(python), str(python.parent / "spanjudge"), base_env))
            if args.against is not None:
                other = make_venv(Path(tmp) / "venv_against", args.against.resolve())
                against = (str(other), str(other.parent / "spanjudge"))
                figures["against"] = str(args.against)
        for name, python, script, env in targets:
            figures[name] = measure(
                python, script, env, args, tmp, against if name == "venv" else None
            )
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    print(f"spanjudge eval {figures['input']} ({figures['input_bytes']:,} bytes), {args.runs} runs")
    for name, *_ in targets:
        f = figures[name]
        label = "this interpreter" if name == "current" else "a fresh venv    "
        if args.importtime:
            found = f["importtime"]
            print(
                f"{label}: imports take {found['spanjudge_self_us'] / 1000:.0f} ms in spanjudge's"
                f" own modules, {found['other_us'] / 1000:.0f} ms in others (self times, under"
                " -X importtime); the slowest (cumulative):"
            )
            for micros, module in found["slowest"]:
                print(f"{micros / 1000:8.1f} ms  {module}")
            continue
        print(
            f"{label}: eval median wall {f['spanjudge_eval_median_s'] * 1000:4.0f} ms,"
            f" CPU {f['spanjudge_eval_cpu_median_s'] * 1000:4.0f} ms; python -c pass wall"
            f" {f['python_c_pass_median_s'] * 1000:3.0f} ms, CPU"
            f" {f['python_c_pass_cpu_median_s'] * 1000:3.0f} ms; ratio wall {f['ratio']:.2f}x,"
            f" CPU {f['cpu_ratio']:.2f}x (fastest runs {f['cpu_min_ratio']:.2f}x; target <="
            f" {TARGET:g}x)"
        )
        if "against" in f:
            a = f["against"]
            cpu_ratio = f["spanjudge_eval_cpu_median_s"] / a["spanjudge_eval_cpu_median_s"]
            print(
                f"  {figures['against']} in the same runs: eval median wall"
                f" {a['spanjudge_eval_median_s'] * 1000:4.0f} ms, CPU"
                f" {a['spanjudge_eval_cpu_median_s'] * 1000:4.0f} ms; ratio wall {a['ratio']:.2f}x,"
                f" CPU {a['cpu_ratio']:.2f}x (fastest runs {a['cpu_min_ratio']:.2f}x); this tree's"
                f" eval CPU / its: {cpu_ratio:.2f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
