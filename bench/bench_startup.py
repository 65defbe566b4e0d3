"""Start-up of `spanjudge eval` on a small file, timed against its peers' command lines.

A release gate runs one eval per build; on a small file nearly all of it is start-up. The goal:
spanjudge quicker than every peer. Each command runs once per round, rounds interleaved (and the
order rotated), so all see the same machine load; the table gives the median and the fastest run
of each, wall and CPU, and spanjudge's time over each peer's (below 1: spanjudge is quicker).

    python bench/bench_startup.py                    # 11 rounds, on strands_default.jsonl
    python bench/bench_startup.py --runs 21 --input fixtures/adk/adk.jsonl
    python bench/bench_startup.py --against ../base  # another checkout's eval in the rounds
    python bench/bench_startup.py --importtime       # the 15 slowest imports of spanjudge's eval

The commands, all on the same file:

- ``spanjudge eval FILE -q -o REPORT``: the console script pip writes for pyproject's entry, in a
  fresh venv `make_venv` builds offline (the tree installed as its wheel, its dependencies linked
  from this environment). ``--current``: this interpreter with the tree's `src/` on PYTHONPATH
  instead; ``--checkout DIR``: another tree in its place (e.g. a clean one while this one is
  being edited).
- Strands Evals: `strands_evals_route.py FILE SKILL` (its cheapest route from a file: json.loads,
  SDK ReadableSpans, per session its mapper and the SkillInvoked check) in the venv
  `scripts/setup-strands-evals` makes.
- agentevals (agentevals-cli): ``agentevals run FILE --group-by conversation`` in the venv
  `scripts/setup-agentevals` makes. It reads the file, groups it by session and extracts the
  invocations; scoring them needs an ADK eval set (expected tool calls, matched by the first user
  message), which this file does not come with, so its default metric reports NOT_EVALUATED.
  This is its floor: a scored run also imports ADK's evaluator registry (several seconds more).
- ``python -c "import opentelemetry.sdk.trace"`` in spanjudge's interpreter: the OTel SDK alone.
- ``python -c pass`` there too: the interpreter's own start-up, for information (not a target).

A peer whose venv is absent is skipped, with the reason printed. Bytecode is cached as after
`pip install`: a warm-up run of each command writes it (to a private cache, whatever
PYTHONDONTWRITEBYTECODE says) and the timed runs load it. CPU time is the child's user + system
time; on a shared machine it is the steadier figure.
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
# 16 sessions that all three tools read: agentevals extracts their invocations and Strands Evals'
# mapper their trajectories (of Claude Code's spans, say, agentevals extracts nothing).
DEFAULT_INPUT = ROOT / "fixtures" / "strands" / "strands_default.jsonl"
CACHE = Path(os.environ.get("SPANJUDGE_CACHE", "/root/.cache/spanjudge"))
STRANDS_EVALS = CACHE / "strands-evals-venv" / "bin" / "python"  # scripts/setup-strands-evals
AGENTEVALS = CACHE / "agentevals-venv" / "bin" / "agentevals"  # scripts/setup-agentevals


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


def _time(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child); exit codes 0 and 1 (a failed verdict) are fine."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        raise RuntimeError(f"exited {done.returncode}: {done.stderr.decode()[-2000:].strip()}")
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


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


def _commands(args: argparse.Namespace, tmp: str) -> tuple[list[dict], list[str]]:
    """The commands to time ({name, role, argv, env}) and the peers skipped, with the reason."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH", "PYTHONHOME")
    }
    env["PYTHONPYCACHEPREFIX"] = os.path.join(tmp, "pyc")
    tree = (args.checkout or ROOT).resolve()
    if args.current:
        python, script = sys.executable, Path(tmp) / "spanjudge"
        script.write_text(console_script(tree))
        own_env = {**env, "PYTHONPATH": str(tree / "src")}
    else:
        venv_python = make_venv(Path(tmp) / "venv", tree)
        python, script, own_env = str(venv_python), venv_python.parent / "spanjudge", env
    report = os.path.join(tmp, "report.txt")
    where = "this interpreter" if args.current else "fresh venv"
    label = "" if tree == ROOT else f" ({os.path.relpath(tree)})"
    commands = [
        {
            "name": f"spanjudge eval{label}, {where}",
            "role": "spanjudge",
            "argv": [python, str(script), "eval", args.input, "-q", "-o", report],
            "env": own_env,
        }
    ]
    if args.against is not None:
        other = make_venv(Path(tmp) / "venv_against", args.against.resolve())
        argv = [str(other), str(other.parent / "spanjudge"), "eval", args.input, "-q", "-o", report]
        name = f"spanjudge eval ({os.path.relpath(args.against.resolve())}), fresh venv"
        commands.append({"name": name, "role": "against", "argv": argv, "env": env})
    skipped = []
    route = str(Path(__file__).with_name("strands_evals_route.py"))
    peers = [
        ("Strands Evals 1.7 route", args.strands_evals, [route, args.input, args.skill]),
        (
            "agentevals run (no eval set)",
            args.agentevals,
            ["run", args.input, "--group-by", "conversation"],
        ),
    ]
    for name, program, rest in peers:
        if Path(program).is_file():
            commands.append({"name": name, "role": "peer", "argv": [program, *rest], "env": env})
        else:
            setup = "strands-evals" if "Strands" in name else "agentevals"
            skipped.append(f"{name}: no {program} (run scripts/setup-{setup})")
    for name, role, code in (
        ("python -c 'import opentelemetry.sdk.trace'", "peer", "import opentelemetry.sdk.trace"),
        ("python -c pass", "floor", "pass"),
    ):
        commands.append({"name": name, "role": role, "argv": [python, "-c", code], "env": own_env})
    return commands, skipped


def measure(commands: list[dict], runs: int, skipped: list[str]) -> None:
    """Warm each command up (a peer that fails is dropped, with the reason), then time ``runs``
    interleaved rounds; each command gets its ``times`` [(wall, CPU), ...]."""
    for command in list(commands):
        try:
            _time(command["argv"], command["env"])  # page cache and bytecode cache
        except RuntimeError as error:
            if command["role"] == "spanjudge":
                raise SystemExit(f"{command['name']} {error}") from None
            commands.remove(command)
            skipped.append(f"{command['name']}: {error}")
        command["times"] = []
    for i in range(runs):
        for command in commands[i % len(commands) :] + commands[: i % len(commands)]:
            command["times"].append(_time(command["argv"], command["env"]))


def _figures(times: list[tuple[float, float]]) -> dict[str, float]:
    walls, cpus = [w for w, _ in times], [c for _, c in times]
    return {
        "wall_median": statistics.median(walls),
        "wall_min": min(walls),
        "cpu_median": statistics.median(cpus),
        "cpu_min": min(cpus),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=11, help="interleaved rounds (default 11)")
    parser.add_argument("--input", default=str(DEFAULT_INPUT))
    parser.add_argument("--skill", default="csv-report", help="Strands Evals' SkillInvoked skill")
    parser.add_argument(
        "--current",
        action="store_true",
        help="run spanjudge in this interpreter with the tree's src/ on PYTHONPATH (no venv)",
    )
    parser.add_argument(
        "--checkout", type=Path, help="measure this checkout's spanjudge (default: this one)"
    )
    parser.add_argument(
        "--against",
        metavar="CHECKOUT",
        type=Path,
        help="also time another checkout's spanjudge (fresh venv) in the same rounds",
    )
    parser.add_argument("--strands-evals", default=str(STRANDS_EVALS), metavar="PYTHON")
    parser.add_argument("--agentevals", default=str(AGENTEVALS), metavar="PROGRAM")
    parser.add_argument("--importtime", action="store_true", help="show the slowest imports")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    args.input = os.path.abspath(args.input)
    with tempfile.TemporaryDirectory() as tmp:
        commands, skipped = _commands(args, tmp)
        if args.importtime:
            argv, env = commands[0]["argv"], commands[0]["env"]
            _time(argv, env)
            found = _importtime(argv, env)
            print(
                f"imports take {found['spanjudge_self_us'] / 1000:.0f} ms in spanjudge's own"
                f" modules, {found['other_us'] / 1000:.0f} ms in others (self times, under"
                " -X importtime); the slowest (cumulative):"
            )
            for micros, module in found["slowest"]:
                print(f"{micros / 1000:8.1f} ms  {module}")
            return 0
        measure(commands, args.runs, skipped)
    own = _figures(commands[0]["times"])
    rows = []
    for command in commands:
        f = _figures(command["times"])
        if command["role"] in ("peer", "against"):
            f["wall_ratio"] = own["wall_median"] / f["wall_median"]
            f["cpu_ratio"] = own["cpu_median"] / f["cpu_median"]
        rows.append(
            {"name": command["name"], "role": command["role"], "argv": command["argv"], **f}
        )
    slower = [r for r in rows if r["role"] == "peer" and r["cpu_ratio"] >= 1]
    if args.json:
        print(
            json.dumps({"input": args.input, "runs": args.runs, "rows": rows, "skipped": skipped})
        )
        return 0
    size = os.path.getsize(args.input)
    print(f"{os.path.relpath(args.input, ROOT)} ({size:,} bytes), {args.runs} interleaved rounds")
    print(
        f"{'command':<48} {'wall ms':>13} {'CPU ms':>13}  spanjudge / it\n"
        f"{'':<48} {'median':>6} {'min':>6} {'median':>6} {'min':>6}  {'wall':>5} {'CPU':>5}"
    )
    for r in rows:
        ratio = (
            f"  {r['wall_ratio']:5.2f} {r['cpu_ratio']:5.2f}"
            if "cpu_ratio" in r
            else ("  (floor, for information)" if r["role"] == "floor" else "")
        )
        times = (r["wall_median"], r["wall_min"], r["cpu_median"], r["cpu_min"])
        print(f"{r['name']:<48} " + " ".join(f"{t * 1000:6.0f}" for t in times) + ratio)
    for reason in skipped:
        print(f"skipped {reason}")
    if any(r["name"].startswith("agentevals") for r in rows):
        print(
            "agentevals read the file with no eval set: its default metric reports NOT_EVALUATED\n"
            "  per session, so this is its floor (a scored run also imports ADK's evaluators)"
        )
    verdict = ", ".join(f"{r['name']} ({r['cpu_ratio']:.2f}x)" for r in slower)
    print(
        "goal (CPU median below every peer's): "
        + (f"not met, slower than {verdict}" if slower else "met")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
