"""`spanjudge.logs`: a registered set-up runs once, before the first logger is handed out, and
a cancelled one never runs."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from spanjudge import logs
from tests.conftest import FIXTURES, fake_distribution

TRACES = FIXTURES / "claude_code" / "claude_code.jsonl"  # 13 sessions
CLI = [sys.executable, "-m", "spanjudge.cli"]


def test_set_up_runs_once_before_the_first_logger() -> None:
    calls: list[str] = []
    logs.on_first_use(lambda: calls.append("set up"))
    assert calls == []  # nothing logged yet: nothing set up
    assert logs.logger("spanjudge.test") is logging.getLogger("spanjudge.test")
    assert calls == ["set up"]
    logs.logger("spanjudge.test")
    assert calls == ["set up"]


def test_a_cancelled_set_up_never_runs() -> None:
    calls: list[str] = []

    def set_up() -> None:
        calls.append("set up")

    logs.on_first_use(set_up)
    logs.cancel(set_up)
    logs.logger("spanjudge.test")
    assert calls == []


def test_a_second_thread_waits_for_the_set_up_another_thread_is_running() -> None:
    import threading

    events: list[str] = []
    started, release = threading.Event(), threading.Event()

    def slow_set_up() -> None:
        started.set()
        release.wait(10)
        events.append("set up done")

    def first_log(label: str) -> None:
        logs.logger("spanjudge.test")
        events.append(label)

    logs.on_first_use(slow_set_up)
    a = threading.Thread(target=first_log, args=("a logged",))
    a.start()
    assert started.wait(10)
    b = threading.Thread(target=first_log, args=("b logged",))
    b.start()
    b.join(0.3)  # b must not log with the set-up half done
    release.set()
    a.join(10)
    b.join(10)
    assert events[0] == "set up done" and sorted(events[1:]) == ["a logged", "b logged"]


LATE_LOGGER = """
class Chatty:
    def emit(self, result):
        import logging  # late: the first import of logging in this run

        logging.getLogger("chatty").warning("chatty saw %s", result.trajectory.session_id)

    def flush(self, timeout_s):
        return True

    def shutdown(self):
        pass


def chatty(options, path, problems):
    return Chatty()
"""


@pytest.mark.slow
@pytest.mark.parametrize("verbose", [[], ["-v"]], ids=["quiet", "verbose"])
def test_a_record_from_code_that_imports_logging_late_has_the_cli_format(
    tmp_path: Path, verbose: list[str]
) -> None:
    """`spanjudge eval` imports `logging` only when something logs; a plugin that imports it
    itself, mid-run, and warns gets the CLI's `spanjudge: LEVEL: message` too (it was printed
    bare by logging's last-resort handler)."""
    site = fake_distribution(
        tmp_path / "site",
        "chatty",
        {"spanjudge.sinks": {"chatty": "chatty:chatty"}},
        {"chatty": LATE_LOGGER},
    )
    config = tmp_path / "spanjudge.yaml"
    config.write_text("emit: {sinks: {chatty: {}}}\n")
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    done = subprocess.run(
        [*CLI, "eval", str(TRACES), "--config", str(config), *verbose, "-o", "report.txt"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": path},
        cwd=tmp_path,
    )
    assert done.returncode in (0, 1), done.stderr
    said = [line for line in done.stderr.splitlines() if "chatty saw" in line]
    assert len(said) == 13, done.stderr  # one per session of the file
    assert all(line.startswith("spanjudge: WARNING: chatty saw ") for line in said), said


@pytest.mark.slow
def test_main_called_in_a_callers_process_gives_its_logging_back(tmp_path: Path) -> None:
    """`spanjudge.cli.main([...])` from a script: afterwards the script's own records are
    formatted as the script set up (here: not at all), not with the CLI's `spanjudge: LEVEL:`."""
    code = (
        "import logging\n"
        "from spanjudge.cli import main\n"
        f"code = main(['eval', {str(TRACES)!r}, '-v', '-o', 'report.txt'])\n"
        "logging.getLogger('caller').warning('the caller logs')\n"
        "logging.getLogger('spanjudge.caller').info('an info nobody asked for')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert any(line.startswith("spanjudge: INFO: reading ") for line in lines), lines  # -v ran
    assert lines[-1] == "the caller logs", lines
    assert "an info nobody asked for" not in done.stderr
