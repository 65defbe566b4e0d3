"""`spanjudge eval` as a release gate in CI: exit codes that can be trusted (a closed pipe, an
internal error, evaluators that crashed, --strict that says why), reports written where asked
(files, FIFOs, symlinks, devices), and what the user reads on stderr and in the table."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from spanjudge.cli import main
from tests.conftest import recorded, write_jsonl
from tests.support.sessions import agent_turn

CLI = [sys.executable, "-m", "spanjudge.cli"]


@pytest.fixture
def traces(tmp_path: Path) -> Path:
    spans = recorded(lambda t: (agent_turn(t, "s-required"), agent_turn(t, "s-free")))
    return write_jsonl(tmp_path / "traces.jsonl", spans)


@pytest.fixture
def expect(tmp_path: Path) -> Path:
    path = tmp_path / "expect.yaml"
    path.write_text("sessions:\n  s-required:\n    skills: [csv-report]\n")
    return path


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, **extra}


def test_a_closed_stdout_pipe_keeps_the_fail_exit_code(traces, expect):  # type: ignore[no-untyped-def]
    proc = subprocess.Popen(
        [*CLI, "eval", str(traces), "--expect", str(expect)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(),
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # `| head -0`: the reader is gone before anything is written
    with proc.stderr:
        err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 1, err
    assert "Traceback" not in err and "Exception ignored" not in err


def test_a_closed_pipe_behind_output_dev_stdout_keeps_the_fail_exit_code(traces, expect):  # type: ignore[no-untyped-def]
    # `spanjudge eval ... -o /dev/stdout | head`: the report is written through the path, and
    # the reader leaving is no more an input error (2) there than on plain stdout.
    proc = subprocess.Popen(
        [*CLI, "eval", str(traces), "--expect", str(expect), "-o", "/dev/stdout"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(),
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    with proc.stderr:
        err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 1, err
    assert "error" not in err and "Traceback" not in err and "Exception ignored" not in err


def test_an_internal_error_exits_3_with_one_line(capsys, monkeypatch, traces):  # type: ignore[no-untyped-def]
    import spanjudge.offline

    def broken(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise KeyError("step")

    monkeypatch.setattr(spanjudge.offline, "run_offline", broken)
    assert main(["eval", str(traces)]) == 3
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith("spanjudge: internal error: KeyError") and "bug" in err
    # -v, after the subcommand too, adds the traceback for the bug report.
    assert main(["eval", str(traces), "-v"]) == 3
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "KeyError: 'step'" in err


@pytest.fixture
def crashing_plugin(tmp_path: Path) -> Path:
    """A third-party evaluator, installed as a distribution with an entry point, that raises."""
    site = tmp_path / "site"
    (site / "crashy-1.0.dist-info").mkdir(parents=True)
    (site / "crashy-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: crashy\nVersion: 1.0\n"
    )
    (site / "crashy-1.0.dist-info" / "entry_points.txt").write_text(
        "[spanjudge.evaluators]\ncrashy = crashy:Crashy.from_options\n"
    )
    (site / "crashy.py").write_text(
        textwrap.dedent(
            """
            class Crashy:
                name = "crashy"

                @classmethod
                def from_options(cls, options, path, problems):
                    return cls()

                def evaluate(self, ctx):
                    raise ZeroDivisionError("division by zero")
            """
        )
    )
    only = tmp_path / "only-crashy.yaml"
    builtins = [
        "skill_loaded",
        "skill_selection",
        "skill_omission",
        "instruction_following",
        "outcome",
        "trajectory_validity",
        "side_effects",
        "cost",
        "robustness",
    ]
    only.write_text(
        "evaluators:\n" + "".join(f"  {name}: {{enabled: false}}\n" for name in builtins)
    )
    return site


def _with_plugin(site: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    # the plugin crashes on purpose: the guards contain it as for a user (no re-raise)
    env = _env(PYTHONPATH=path, SPANJUDGE_RAISE_INTERNAL_ERRORS="")
    return subprocess.run([*CLI, *argv], capture_output=True, text=True, env=env, timeout=120)


def test_a_gate_whose_every_evaluator_crashed_says_so_and_can_fail(crashing_plugin, traces):  # type: ignore[no-untyped-def]
    config = str(crashing_plugin.parent / "only-crashy.yaml")
    done = _with_plugin(crashing_plugin, "eval", str(traces), "--config", config)
    assert done.returncode == 0, done.stderr
    assert "2 verdict(s) not evaluated because an evaluator raised" in done.stderr
    assert "evaluator_error: crashy x2" in done.stderr
    assert "--fail-on-error would fail the gate" in done.stderr
    failing = _with_plugin(
        crashing_plugin, "eval", str(traces), "--config", config, "--fail-on-error"
    )
    assert failing.returncode == 1, failing.stderr
    assert "--fail-on-error: failing" in failing.stderr


def test_strict_names_the_not_evaluated_verdicts_that_failed_it(capsys, traces, expect):  # type: ignore[no-untyped-def]
    assert main(["eval", str(traces), "--expect", str(expect), "--strict"]) == 1
    err = capsys.readouterr().err
    [line] = [x for x in err.splitlines() if x.startswith("spanjudge: --strict")]
    # The session with no expected skill has nothing to judge skill_loaded against: not a gap.
    assert "failing on 2 not_evaluated" in line, line
    assert "skill_omission [no_catalogue] x2 (e.g. session s-required)" in line, line
    assert "no_expectation" not in line, line


def test_strict_help_says_what_strict_does(capsys):  # type: ignore[no-untyped-def]
    # --strict leaves out what had nothing configured to judge against and what did not arise,
    # and fails an input with no spans: the help must not promise "any not_evaluated verdict".
    with pytest.raises(SystemExit):
        main(["eval", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    strict = out.split("--strict ", 1)[1].split(" --fail-on-error ", 1)[0]
    assert "no_budget" in strict and "not_invoked" in strict and "no spans" in strict, strict


def test_unknown_flag_after_eval_shows_evals_usage(capsys, traces):  # type: ignore[no-untyped-def]
    with pytest.raises(SystemExit) as exit_:
        main(["eval", str(traces), "--bogus"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: spanjudge eval") and "unrecognized arguments: --bogus" in err


def test_writing_a_report_file_prints_a_summary_line(capsys, tmp_path, traces, expect):  # type: ignore[no-untyped-def]
    report = tmp_path / "report.json"
    code = main(
        ["eval", str(traces), "--expect", str(expect), "--format", "json", "-o", str(report)]
    )
    assert code == 1
    err = capsys.readouterr().err
    assert f"spanjudge: wrote json report to {report}: 2 session(s); 0 pass, 1 fail," in err


def test_explanations_are_whole_in_a_file_wrapped_to_100_columns(
    capsys, tmp_path, traces, monkeypatch
):  # type: ignore[no-untyped-def]
    monkeypatch.delenv("COLUMNS", raising=False)
    table = tmp_path / "table.txt"
    assert main(["eval", str(traces), "--show", "all", "-o", str(table)]) == 0
    text = table.read_text()
    assert max(len(line) for line in text.splitlines()) <= 100
    assert "repeated mutations 0, created then deleted 0" in " ".join(text.split())
    assert "…" not in text


# --output: atomic rename only for regular files; anything else is written through.


def test_output_to_a_fifo_is_written_through(tmp_path, traces):  # type: ignore[no-untyped-def]
    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    received: list[str] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text()), daemon=True)
    reader.start()
    done = subprocess.run(
        [*CLI, "eval", str(traces), "--format", "json", "-o", str(fifo)],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )
    reader.join(timeout=30)
    assert done.returncode == 0, done.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO was replaced by a regular file"
    assert received and '"sessions"' in received[0]


def test_output_through_a_symlink_keeps_the_link(capsys, tmp_path, traces):  # type: ignore[no-untyped-def]
    real = tmp_path / "reports" / "latest.json"
    real.parent.mkdir()
    real.write_text("old")
    os.chmod(real, 0o640)
    link = tmp_path / "report.json"
    link.symlink_to(real)
    assert main(["eval", str(traces), "--format", "json", "-o", str(link)]) == 0
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert '"sessions"' in real.read_text()
    assert stat.S_IMODE(os.stat(real).st_mode) == 0o640
    assert sorted(p.name for p in real.parent.iterdir()) == ["latest.json"]


def test_output_to_a_device_node_is_written_through(capsys, tmp_path, traces):  # type: ignore[no-untyped-def]
    node = tmp_path / "null"
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # the same device as /dev/null
    except PermissionError:
        pytest.skip("creating a device node needs root")
    assert main(["eval", str(traces), "-o", str(node)]) == 0
    assert stat.S_ISCHR(os.lstat(node).st_mode), "the device node was replaced by a regular file"


def test_output_to_proc_self_fd_1_reaches_stdout(traces):  # type: ignore[no-untyped-def]
    done = subprocess.run(
        [*CLI, "eval", str(traces), "--format", "json", "-o", "/proc/self/fd/1"],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert '"sessions"' in done.stdout


@pytest.mark.parametrize("mode", ["a", "w"], ids=[">>", "> after a header"])
def test_output_dev_stdout_to_a_regular_file_keeps_what_is_already_there(tmp_path, traces, mode):  # type: ignore[no-untyped-def]
    # `spanjudge eval -o /dev/stdout >> ci.log`, `{ echo header; spanjudge eval -o /dev/stdout; }
    # > out.txt`: the report is added to the file behind stdout, as a shell redirection adds it.
    log = tmp_path / "ci.log"
    log.write_text("an earlier line\n")
    with open(log, mode) as stdout:
        if mode == "w":
            stdout.write("header\n")
            stdout.flush()
        done = subprocess.run(
            [*CLI, "eval", str(traces), "--format", "json", "-o", "/dev/stdout"],
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(),
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    text = log.read_text()
    kept = "an earlier line\n" if mode == "a" else "header\n"
    assert text.startswith(kept + '{"spanjudge_version"'), text[:200]
    assert text.rstrip().endswith("}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ci.log", "traces.jsonl"]


def test_a_crashed_runs_leftover_temporary_file_does_not_block_the_report(capsys, tmp_path, traces):  # type: ignore[no-untyped-def]
    # A container's spanjudge often has the same pid every run; a run killed while writing left
    # its temporary file behind.
    report = tmp_path / "report.json"
    leftover = tmp_path / f".report.json.{os.getpid()}.tmp"
    leftover.write_text("half of an old report")
    assert main(["eval", str(traces), "--format", "json", "-o", str(report)]) == 0
    assert '"sessions"' in report.read_text()
    assert "error" not in capsys.readouterr().err
    assert leftover.read_text() == "half of an old report"  # not ours: left alone


def test_a_failure_while_writing_leaves_the_old_report_whole(capsys, monkeypatch, tmp_path, traces):  # type: ignore[no-untyped-def]
    import errno

    from spanjudge.cli_output import Spool

    report = tmp_path / "report.json"
    report.write_text("the previous report")

    def disk_full(self, out):  # type: ignore[no-untyped-def]
        out.write("half a report")
        out.flush()
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(Spool, "copy_to", disk_full)
    assert main(["eval", str(traces), "--format", "json", "-o", str(report)]) == 2
    err = capsys.readouterr().err
    assert f"spanjudge: error: {report}: cannot write the report: No space left on device" in err
    assert report.read_text() == "the previous report"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json", "traces.jsonl"]


def test_progress_shows_a_percentage_when_the_size_is_known(tmp_path, traces):  # type: ignore[no-untyped-def]
    import pty

    parent, child = pty.openpty()  # stderr a terminal, as when a person runs it
    try:
        done = subprocess.run(
            [*CLI, "eval", str(traces), "-o", str(tmp_path / "table.txt")],
            stdout=subprocess.DEVNULL,
            stderr=child,
            env=_env(),
            timeout=120,
        )
        os.close(child)
        chunks = []
        while True:
            try:
                data = os.read(parent, 65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(parent)
    shown = b"".join(chunks).decode()
    assert done.returncode == 0, shown
    assert "100% 2 spans" in shown


def test_the_table_legend_defines_coverage_as_the_report_computes_it(capsys):  # type: ignore[no-untyped-def]
    import json

    from tests.conftest import FIXTURES

    traces = FIXTURES / "claude_code" / "claude_code.jsonl"
    expect = FIXTURES / "claude_code" / "expectations.yaml"
    main(["eval", str(traces), "--expect", str(expect)])
    table = capsys.readouterr().out
    assert "coverage = (pass + fail) / the verdicts that could" in table
    assert "have been judged, i.e. all but those outside coverage" in table
    main(["eval", str(traces), "--expect", str(expect), "--format", "json"])
    by_evaluator = json.loads(capsys.readouterr().out)["summary"]["by_evaluator"]
    assert any(c["outside_coverage"] for c in by_evaluator.values())  # the rule is exercised
    for counts in by_evaluator.values():
        applicable = counts["pass"] + counts["fail"] + counts["not_evaluated"]
        applicable -= sum(counts["outside_coverage"].values())
        judged = counts["pass"] + counts["fail"]
        assert counts["coverage"] == (judged / applicable if applicable else None)


def _strands_session(tmp_path: Path, session_id: str) -> Path:
    """The recorded Strands traces of one session (one trace per line in the fixture)."""
    from tests.conftest import FIXTURES

    lines = (FIXTURES / "strands" / "strands_default.jsonl").read_text().splitlines()
    mine = [line for line in lines if f'"stringValue":"{session_id}"' in line]
    assert mine, session_id
    path = tmp_path / f"{session_id}.jsonl"
    path.write_text("\n".join(mine) + "\n")
    return path


def test_strict_passes_an_agent_that_did_everything_right(capsys, tmp_path):  # type: ignore[no-untyped-def]
    # No budget, thresholds, condition or constraints are configured, and skill_omission does
    # not arise once a skill is used: none of that is a verdict that could have been judged.
    from tests.conftest import FIXTURES

    traces = _strands_session(tmp_path, "strands-default-required-skill-followed")
    expect = FIXTURES / "strands" / "expectations.yaml"
    assert main(["eval", str(traces), "--expect", str(expect), "--strict"]) == 0
    captured = capsys.readouterr()
    assert "--strict" not in captured.err, captured.err
    # ... and the verdicts left out are listed apart, with their counts (the table wraps them to
    # its width).
    words = " ".join(captured.out.split())
    assert "outside coverage, nothing configured to judge against: " in words
    assert "cost [no_budget] x1" in words and "robustness [no_thresholds] x1" in words
    assert "outside coverage, the question did not arise: skill_omission [not_applicable] x1" in (
        words
    )


def test_strict_fails_an_agent_that_skipped_the_required_skill(capsys, tmp_path):  # type: ignore[no-untyped-def]
    from tests.conftest import FIXTURES

    traces = _strands_session(tmp_path, "strands-default-skill-never-loaded-fluent")
    expect = FIXTURES / "strands" / "expectations.yaml"
    assert main(["eval", str(traces), "--expect", str(expect), "--strict"]) == 1
    out = capsys.readouterr().out
    assert "FAIL           0.00  skill_loaded           csv-report" in out
    # What the skipped skill left with nothing to judge is no coverage gap: 100% or n/a.
    rows: dict[str, list[str]] = {}
    for line in out.splitlines():
        if line.startswith("  ") and line.split():  # the summary's rows come first
            rows.setdefault(line.split()[0], line.split())
    assert rows["instruction_following"][-2:] == ["n/a", "n/a"]
    assert rows["skill_selection"][-2:] == ["n/a", "n/a"]
    assert "instruction_following [not_invoked] x1" in " ".join(out.split())


def test_an_evaluator_crash_is_logged_in_the_cli_format_without_verbose(
    crashing_plugin: Path, traces: Path
) -> None:
    # Without -v, `logging` is set up only when something is logged: this is such a run.
    config = str(crashing_plugin.parent / "only-crashy.yaml")
    done = _with_plugin(crashing_plugin, "eval", str(traces), "--config", config)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert any(
        line.startswith("spanjudge: ERROR: evaluator") and "crashy" in line for line in lines
    ), done.stderr
    assert "Traceback (most recent call last)" in done.stderr  # logged once, with its traceback
