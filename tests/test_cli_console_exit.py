"""The console entry skips the interpreter's teardown only where nothing could need it: not
under a profiler or tracer that runs the console script and does its work once it returns
(`python -m cProfile -o prof.out $(which spanjudge) eval ...`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import FIXTURES

TRACES = FIXTURES / "claude_code" / "claude_code.jsonl"
# What pip writes for the `spanjudge = "spanjudge.cli:console"` entry point.
SCRIPT = "import sys\nfrom spanjudge.cli import console\nsys.exit(console())\n"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    return {**env, "PYTHONPATH": os.pathsep.join(sys.path)}


def test_a_profile_of_the_command_is_written(tmp_path: Path) -> None:
    script = tmp_path / "spanjudge_script.py"
    script.write_text(SCRIPT)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "cProfile",
            "-o",
            "prof.out",
            str(script),
            "eval",
            str(TRACES),
            "-q",
            "-o",
            "report.txt",
        ],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr  # cProfile takes the command's SystemExit
    assert (tmp_path / "prof.out").stat().st_size > 0
    table = (tmp_path / "report.txt").read_text().splitlines()
    assert sum(line.startswith("session ") for line in table) == 13
