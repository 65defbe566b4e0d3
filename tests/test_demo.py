"""`spanjudge demo`: the bundled scripted agent judged in-process, printed as a verdict table."""

from __future__ import annotations

import pytest

from spanjudge.demo import main, run_demo


def test_demo_shows_pass_fail_and_not_evaluated(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()

    def verdict_line(session: str, evaluator: str) -> str:
        start = lines.index(next(line for line in lines if line.startswith(f"session {session}")))
        for line in lines[start + 1 :]:
            if line.startswith("session "):
                break
            if f" {evaluator} " in line:
                return line
        raise AssertionError(f"no {evaluator} verdict for {session}:\n{out}")

    assert verdict_line("demo-csv-report", "skill_loaded").lstrip().startswith("PASS")
    failed = verdict_line("demo-incident", "skill_loaded")
    assert failed.lstrip().startswith("FAIL") and "incident-triage" in failed
    assert "never loaded" in failed
    skipped = verdict_line("demo-weather", "skill_loaded")
    assert skipped.lstrip().startswith("NOT EVALUATED") and "[no_expectation]" in skipped
    assert "3 spanjudge.evaluate span(s)" in out


def test_demo_results_are_complete_sessions_with_emitted_verdicts() -> None:
    results, counts = run_demo()
    assert [r.trajectory.session_id for r in results] == [
        "demo-csv-report",
        "demo-incident",
        "demo-weather",
    ]
    assert all(r.trajectory.complete for r in results)
    assert counts["evaluation_spans"] == 3
    assert counts["log_records"] == sum(len(r.verdicts) for r in results)
    assert counts["agent_spans"] == 16


def test_the_console_script_runs_the_demo() -> None:
    import shutil
    import subprocess

    exe = shutil.which("spanjudge")
    assert exe is not None, "the package's console script is not installed"
    done = subprocess.run([exe, "demo"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "PASS" in done.stdout and "FAIL" in done.stdout and "NOT EVALUATED" in done.stdout
    assert "required skill 'incident-triage' was never loaded" in done.stdout


def test_demo_written_to_a_file_or_pipe_keeps_explanations_whole(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # `spanjudge demo > out.txt`: nothing to fit, so no explanation is cut with an ellipsis.
    assert main([]) == 0
    out = capsys.readouterr().out
    assert "…" not in out, out
    assert max(len(line) for line in out.splitlines()) > 140  # whole explanations, uncut
