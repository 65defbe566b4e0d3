"""`-v` / `-vv` say what a run read, found and wrote; `--color` / `--no-color` do what they say
on `eval` and `demo`. Run as a user runs them: a subprocess, its stderr and stdout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, fake_distribution

CLI = [sys.executable, "-m", "spanjudge.cli"]
TRACES = FIXTURES / "claude_code" / "claude_code.jsonl"  # 13 sessions, 166 spans
ESC = "\033["


def _run(*argv: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    environ.update(env)
    done = subprocess.run(
        [*CLI, *argv], capture_output=True, text=True, cwd=cwd, env=environ, timeout=120
    )
    assert done.returncode in (0, 1), done.stderr
    return done


@pytest.mark.parametrize(
    "argv",
    [["eval", str(TRACES), "-v"], ["-v", "eval", str(TRACES)]],
    ids=["after", "before"],
)
def test_verbose_logs_the_input_the_sessions_and_the_report(tmp_path, argv) -> None:  # type: ignore[no-untyped-def]
    done = _run(*argv, "-o", "report.txt", cwd=tmp_path)
    info = [line for line in done.stderr.splitlines() if line.startswith("spanjudge: INFO: ")]
    assert f"spanjudge: INFO: reading {TRACES} ({TRACES.stat().st_size:,} bytes)" in info
    assert any("166 span(s); 13 session(s) evaluated" in line for line in info), done.stderr
    assert "DEBUG" not in done.stderr  # -v is INFO, not DEBUG
    assert "wrote table report to report.txt: 13 session(s)" in done.stderr


def test_without_verbose_there_are_no_log_lines(tmp_path) -> None:  # type: ignore[no-untyped-def]
    done = _run("eval", str(TRACES), "-o", "report.txt", cwd=tmp_path)
    assert "INFO" not in done.stderr and "DEBUG" not in done.stderr, done.stderr


def test_twice_verbose_adds_each_session_and_the_evaluators(tmp_path) -> None:  # type: ignore[no-untyped-def]
    done = _run("-v", "eval", str(TRACES), "-v", "--format", "json", cwd=tmp_path)
    debug = [line for line in done.stderr.splitlines() if line.startswith("spanjudge: DEBUG: ")]
    sessions = [line for line in debug if line.startswith("spanjudge: DEBUG: session ")]
    assert len(sessions) == 13, done.stderr
    assert any("skill_loaded" in line for line in debug if "evaluators:" in line)
    assert "spanjudge: INFO: json report written to stdout" in done.stderr
    assert done.stdout.lstrip().startswith("{")  # stdout is the report alone


def test_eval_color_and_no_color(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # A pipe is not a terminal: no colour unless asked for; --no-color wins over nothing.
    assert ESC not in _run("eval", str(TRACES), cwd=tmp_path).stdout
    coloured = _run("eval", str(TRACES), "--color", "--show", "all", cwd=tmp_path).stdout
    assert f"{ESC}31mFAIL" in coloured and f"{ESC}32mPASS" in coloured
    assert ESC not in _run("eval", str(TRACES), "--no-color", cwd=tmp_path).stdout
    # --color is the user's explicit choice: it wins over NO_COLOR.
    assert ESC in _run("eval", str(TRACES), "--color", cwd=tmp_path, NO_COLOR="1").stdout


def test_demo_accepts_color_and_no_color_as_its_help_says(tmp_path) -> None:  # type: ignore[no-untyped-def]
    helped = _run("demo", "--help", cwd=tmp_path).stdout
    assert "--color, --no-color" in helped
    coloured = _run("demo", "--color", cwd=tmp_path).stdout
    assert f"{ESC}31mFAIL" in coloured and f"{ESC}32mPASS" in coloured
    plain = _run("demo", "--no-color", cwd=tmp_path).stdout
    assert ESC not in plain and "FAIL" in plain
    assert ESC not in _run("demo", cwd=tmp_path).stdout  # not a terminal: plain by default


def test_a_report_past_the_memory_limit_goes_through_a_temporary_file_whole() -> None:
    import io

    from spanjudge.cli_output import Spool

    spool = Spool(limit=10)
    pieces = ["session a\n", "x" * 25, "\n", "é" * 70_000, "end\n"]
    for piece in pieces:
        spool.write(piece)
    assert spool._memory is None  # spilled: the limit is 10 characters
    out = io.StringIO()
    spool.copy_to(out)
    spool.close()
    assert out.getvalue() == "".join(pieces)


def test_main_called_in_process_leaves_the_callers_logging_as_it_was(tmp_path: Path) -> None:
    import logging

    from spanjudge.cli import main

    ours = logging.getLogger("spanjudge")
    before = ours.level
    assert main(["eval", str(TRACES), "-vv", "-q", "-o", str(tmp_path / "r.txt")]) in (0, 1)
    assert ours.level == before


def test_a_configured_judges_warning_keeps_the_cli_format_without_verbose(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json

    from tests.judges.chat_server import Scripted, chat_server, completion
    from tests.support.judged import TRACES as JUDGED
    from tests.support.judged import config

    # llama.cpp's server refuses json_schema with HTTP 500: the judge says so, once, and moves on.
    refusal = Scripted(status=500, body={"error": {"message": "json_schema is not supported"}})
    answer = completion(json.dumps({"rating": "no", "rationale": "asked for release notes"}))
    with chat_server(refusal, *[answer] * 200) as server:
        done = _run(
            "eval", str(JUDGED), "--config", str(config(tmp_path, server.base_url)), cwd=tmp_path
        )
    warned = [line for line in done.stderr.splitlines() if "refused response_format" in line]
    assert len(warned) == 1 and warned[0].startswith("spanjudge: WARNING: judge llm:"), done.stderr


PLUGIN_SINK = """
import logging


class Chatty:
    def emit(self, result):
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
def test_a_plugins_warning_has_the_cli_format(tmp_path: Path, verbose: list[str]) -> None:
    """A plugin logging through its own logger gets `spanjudge: LEVEL: message` too, not a bare
    line from logging's last-resort handler."""
    site = fake_distribution(
        tmp_path / "site",
        "chatty",
        {"spanjudge.sinks": {"chatty": "chatty:chatty"}},
        {"chatty": PLUGIN_SINK},
    )
    config = tmp_path / "spanjudge.yaml"
    config.write_text("emit: {sinks: {chatty: {}}}\n")
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    done = _run(
        "eval",
        str(TRACES),
        "--config",
        str(config),
        *verbose,
        "-o",
        "report.txt",
        cwd=tmp_path,
        PYTHONPATH=path,
    )
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


def _coloured_on_a_terminal(*argv: str, **env: str) -> bool:
    """Whether ``spanjudge ARGV`` colours its stdout when stdout is a terminal (a pty)."""
    import pty

    parent, child = pty.openpty()
    environ = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM")}
    environ.update({"TERM": "xterm-256color", **env})
    proc = subprocess.Popen([*CLI, *argv], stdout=child, stderr=subprocess.DEVNULL, env=environ)
    os.close(child)
    out = b""
    try:
        while chunk := os.read(parent, 1 << 16):
            out += chunk
    except OSError:  # EIO: the child closed the terminal
        pass
    finally:
        os.close(parent)
    assert proc.wait(timeout=120) in (0, 1)
    assert b"FAIL" in out
    return ESC.encode() in out


@pytest.mark.parametrize("command", [["eval", str(TRACES)], ["demo"]], ids=["eval", "demo"])
def test_a_terminal_is_coloured_unless_no_color_or_term_dumb(command: list[str]) -> None:
    assert _coloured_on_a_terminal(*command)
    assert not _coloured_on_a_terminal(*command, NO_COLOR="1")
    assert not _coloured_on_a_terminal(*command, TERM="dumb")
    assert not _coloured_on_a_terminal(*command, "--no-color")
    assert _coloured_on_a_terminal(*command, "--no-color", "--color")  # the last one given wins


def test_calibrate_verbose_after_the_subcommand_says_what_it_read(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from spanjudge.calibration import load_labels
    from tests.support.labelled import LABELS
    from tests.support.labelled import TRACES as LABELLED

    done = _run("calibrate", str(LABELS), *LABELLED, "-v", cwd=tmp_path)
    info = [line for line in done.stderr.splitlines() if line.startswith("spanjudge: INFO: ")]
    assert f"spanjudge: INFO: labels: {len(load_labels(str(LABELS)))} from {LABELS}" in info
    assert [f"spanjudge: INFO: reading {path}" for path in LABELLED] == [
        line for line in info if "reading" in line
    ]
    assert done.stdout.startswith("evaluator")  # stdout is the table alone
    quiet = _run("calibrate", str(LABELS), *LABELLED, cwd=tmp_path)
    assert "INFO" not in quiet.stderr, quiet.stderr


def test_demo_verbose_says_what_it_ran_and_emitted(tmp_path) -> None:  # type: ignore[no-untyped-def]
    done = _run("demo", "-vv", cwd=tmp_path)
    lines = done.stderr.splitlines()
    assert (
        "spanjudge: INFO: running 3 scripted scenario(s) through SpanJudgeProcessor"
        " (in-memory exporters)" in lines
    ), done.stderr
    sessions = [line for line in lines if line.startswith("spanjudge: DEBUG: session demo-")]
    assert len(sessions) == 3, done.stderr
    # the totals the demo prints on stdout, said on stderr too
    assert "spanjudge: INFO: 3 session(s) judged; 3 evaluation span(s)," in done.stderr
    assert "emitted: 3 spanjudge.evaluate span(s)" in done.stdout
    once = _run("-v", "demo", cwd=tmp_path)
    assert "INFO: running 3 scripted" in once.stderr and "DEBUG" not in once.stderr
    quiet = _run("demo", cwd=tmp_path)
    assert "INFO" not in quiet.stderr, quiet.stderr
