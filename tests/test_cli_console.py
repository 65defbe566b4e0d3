"""The `spanjudge` command's own process (`spanjudge.cli.console`: the console script and
`python -m spanjudge`): the whole report in a pipe or a file, every exit status, atexit work
done, threads waited for, a plugin's open file written out, a profiler's output saved; and
`main(argv)` in a caller's process returns and changes nothing of the process."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import tomllib

from spanjudge.cli import main
from tests.conftest import FIXTURES, ROOT, recorded, write_jsonl
from tests.support.sessions import agent_turn

TRACES = FIXTURES / "claude_code" / "claude_code.jsonl"  # 13 sessions; its JSON report > 64 KB
# The table's last line (by default it lists the failing sessions and counts the others).
TABLE_LAST_LINE = "--show all lists every session\n"


def _env() -> dict[str, str]:
    # Buffered, as for most users (PYTHONUNBUFFERED would hide a flush left undone).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    return {**env, "PYTHONPATH": os.pathsep.join(sys.path)}


def _spanjudge(*argv: str, **kwargs: object) -> subprocess.CompletedProcess[bytes]:
    """`python -m spanjudge ARGV`, as a user runs it (the console script runs the same)."""
    return subprocess.run(  # type: ignore[call-overload,no-any-return]
        [sys.executable, "-m", "spanjudge", *argv], env=_env(), timeout=120, **kwargs
    )


def _console_after(prologue: str, *argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The console entry run with ``argv`` after ``prologue`` (what a plugin or a wrapper may
    have set up in the process before the command ran)."""
    script = textwrap.dedent(prologue) + "\nfrom spanjudge.cli import console\nconsole()\n"
    return subprocess.run(
        [sys.executable, "-c", script, *argv],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=cwd,
        timeout=120,
    )


@pytest.fixture
def passing(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "pass.jsonl", recorded(lambda t: agent_turn(t, "s-1")))


def test_the_console_script_is_the_console_entry() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["spanjudge"] == "spanjudge.cli:console"


def test_a_json_report_larger_than_a_pipe_arrives_whole_through_the_pipe() -> None:
    done = _spanjudge("eval", str(TRACES), "--format", "json", capture_output=True)
    assert done.returncode == 1, done.stderr  # the fixture has a failing verdict
    assert len(done.stdout) > 65536
    report = json.loads(done.stdout)
    assert len(report["sessions"]) == 13
    assert done.stdout.endswith(b"}\n")


def test_a_table_on_stdout_redirected_to_a_file_arrives_whole(tmp_path: Path) -> None:
    out = tmp_path / "table.txt"
    with out.open("wb") as handle:
        done = _spanjudge(
            "eval", str(TRACES), "--show", "all", stdout=handle, stderr=subprocess.PIPE
        )
    assert done.returncode == 1, done.stderr
    text = out.read_text()
    assert "\n13 session(s); verdicts: " in text and text.endswith(")\n")  # the summary's end
    assert sum(line.startswith("session ") for line in text.splitlines()) == 13


def test_help_and_version_are_printed_whole_with_status_0() -> None:
    help_ = _spanjudge("eval", "--help", capture_output=True)
    assert help_.returncode == 0
    assert help_.stdout.startswith(b"usage: spanjudge eval")
    assert help_.stdout.rstrip().endswith(b"--strict --fail-on-error traces.jsonl")
    version = _spanjudge("--version", capture_output=True)
    assert version.returncode == 0 and version.stdout.startswith(b"spanjudge ")


def test_exit_statuses_through_the_console(passing: Path, tmp_path: Path) -> None:
    assert _spanjudge("eval", str(passing), "-q", capture_output=True).returncode == 0
    assert _spanjudge("eval", str(TRACES), "-q", capture_output=True).returncode == 1
    missing = _spanjudge("eval", str(tmp_path / "missing.jsonl"), capture_output=True)
    assert missing.returncode == 2 and b"spanjudge: error:" in missing.stderr
    usage = _spanjudge("eval", str(passing), "--bogus", capture_output=True)
    assert usage.returncode == 2 and b"unrecognized arguments: --bogus" in usage.stderr
    broken = _console_after(
        """
        import spanjudge.offline
        def broken(*args, **kwargs):
            raise KeyError("step")
        spanjudge.offline.run_offline = broken
        """,
        "eval",
        str(passing),
        cwd=tmp_path,
    )
    assert broken.returncode == 3
    assert broken.stderr.startswith("spanjudge: internal error: KeyError")


def test_atexit_handlers_run_and_what_they_print_is_flushed(tmp_path: Path) -> None:
    done = _console_after(
        """
        import atexit, sys
        atexit.register(lambda: open("saved.txt", "w").write("saved"))
        atexit.register(lambda: print("last words", end=""))  # buffered: a pipe is not a tty
        """,
        "eval",
        str(TRACES),
        "--format",
        "json",
        cwd=tmp_path,
    )
    assert done.returncode == 1, done.stderr
    assert (tmp_path / "saved.txt").read_text() == "saved"
    report, _, last = done.stdout.rpartition("}\n")
    assert last == "last words"
    assert len(json.loads(report + "}")["sessions"]) == 13


def test_loggings_buffered_handlers_are_flushed_at_exit(tmp_path: Path) -> None:
    # A handler that writes only when flushed (at logging's shutdown, an atexit handler).
    done = _console_after(
        """
        import logging, logging.handlers
        target = logging.FileHandler("log.txt")
        buffered = logging.handlers.MemoryHandler(10_000, target=target, flushOnClose=True)
        logging.getLogger("spanjudge").addHandler(buffered)
        """,
        "eval",
        str(TRACES),
        "-v",
        "-o",
        "report.txt",
        cwd=tmp_path,
    )
    assert done.returncode == 1, done.stderr
    log = (tmp_path / "log.txt").read_text()
    assert log.startswith("configuration: none") and "13 session(s) evaluated" in log


def test_a_thread_still_running_is_waited_for(tmp_path: Path) -> None:
    # A plugin's non-daemon thread still at work when the command returns: Python waits for it
    # at a normal exit, so the command must not end before it either.
    done = _console_after(
        """
        import threading, time
        def later():
            time.sleep(0.5)
            open("late.txt", "w").write("done")
        threading.Thread(target=later).start()
        """,
        "eval",
        str(TRACES),
        "-q",
        "-o",
        "report.txt",
        cwd=tmp_path,
    )
    assert done.returncode == 1, done.stderr
    assert (tmp_path / "late.txt").read_text() == "done"
    assert (tmp_path / "report.txt").read_text().endswith(TABLE_LAST_LINE)


def test_main_in_a_callers_process_returns_and_leaves_the_process_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    thresholds = gc.get_threshold()
    assert main(["eval", str(TRACES), "-q", "-o", str(tmp_path / "t.txt")]) == 1
    assert gc.get_threshold() == thresholds
    assert "wrote table report" in capsys.readouterr().err


def test_a_file_a_plugin_module_keeps_open_is_written_out(tmp_path: Path) -> None:
    # A plugin's module holds an open file with buffered data that only the teardown flushes.
    (tmp_path / "plugin_mod.py").write_text(
        'LOG = open("plugin.log", "w")\nLOG.write("plugin was here\\n")\n'
    )
    done = _console_after(
        "import plugin_mod", "eval", str(TRACES), "-q", "-o", "r.txt", cwd=tmp_path
    )
    assert done.returncode == 1, done.stderr
    assert (tmp_path / "plugin.log").read_text() == "plugin was here\n"
    assert (tmp_path / "r.txt").read_text().endswith(TABLE_LAST_LINE)


# What pip writes for the `spanjudge = "spanjudge.cli:console"` entry point.
CONSOLE_SCRIPT = "import sys\nfrom spanjudge.cli import console\nsys.exit(console())\n"


def test_a_profile_of_the_command_is_written(tmp_path: Path) -> None:
    # `python -m cProfile -o prof.out $(which spanjudge) eval ...`: the profiler saves its
    # output once the console script returns.
    script = tmp_path / "spanjudge_script.py"
    script.write_text(CONSOLE_SCRIPT)
    argv = ("eval", str(TRACES), "-q", "--show", "all", "-o", "report.txt")
    done = subprocess.run(
        [sys.executable, "-m", "cProfile", "-o", "prof.out", str(script), *argv],
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
