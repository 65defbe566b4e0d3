"""`--format html`: a self-contained page that renders in headless Chromium, content escaped."""

from __future__ import annotations

import io
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from spanjudge.cli import main
from spanjudge.emit.html import HtmlWriter
from spanjudge.emit.summary import Summary
from spanjudge.trajectory.assemble import SessionMeta, assemble
from spanjudge.values import Coverage, Expectation, SessionResult, Verdict
from tests.conftest import ROOT, unavailable
from tests.support.reports import STRANDS, records
from tests.support.steps import spans_for, tool, turn

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
EVIL = '<script>document.title="pwned"</script><img src=x onerror="document.body.dataset.pwned=1">'


def hostile_result() -> SessionResult:
    steps = [turn(1, EVIL), tool(2, EVIL, args={"path": EVIL}, error=EVIL)]
    meta = SessionMeta(session_id=f"s-{EVIL}", key_source="session.id", complete=True)
    t = assemble(meta, spans_for(steps), steps)
    verdict = Verdict(
        evaluator="robustness",
        outcome="not_evaluated",
        score=None,
        label="not_evaluated",
        explanation=EVIL,
        reason="no_thresholds",
        evidence=(format(2, "016x"),),
    )
    return SessionResult(
        trajectory=t,
        expectation=Expectation(),
        verdicts=(verdict,),
        coverage=Coverage(
            expected_skills=0,
            expected_skills_loaded=0,
            skill_invocations=0,
            invocations_with_body=0,
        ),
    )


def render(results: list[SessionResult]) -> str:
    out = io.StringIO()
    writer, summary = HtmlWriter(out), Summary()
    writer.begin()
    for result in results:
        summary.add(result)
        writer.session(result)
    writer.end(summary, {"skipped": 0})
    return out.getvalue()


def test_agent_content_is_escaped_and_nothing_external_is_loaded():
    page = render([hostile_result()])
    assert "<script>document.title" not in page and "<img" not in page
    assert "&lt;script&gt;" in page and "onerror=&quot;" in page
    assert "<script" not in page  # the page ships no script, the agent's text none either
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)
    assert "NOT EVALUATED" in page and "o-ne" in page and "[no_thresholds]" in page


def chromium(url: str, *extra: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    profile = tmp / f"profile-{len(list(tmp.iterdir()))}"
    return subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *extra, url],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.slow
def test_fixture_report_renders_every_session_and_task_in_headless_chromium(tmp_path, capsys):  # type: ignore[no-untyped-def]
    if CHROMIUM is None:
        unavailable("chromium", "chromium is not installed (CI installs Debian chromium)")
    config = tmp_path / "spanjudge.yaml"
    config.write_text(
        "evaluators:\n  side_effects: {scope: ['out/**']}\n  robustness: {max_retries: 0}\n"
    )
    page = tmp_path / "report.html"
    main(
        [
            "eval",
            "--config",
            str(config),
            "--format",
            "html",
            "--output",
            str(page),
            str(STRANDS / "strands_trajectory.jsonl"),
        ]
    )
    capsys.readouterr()
    text = page.read_text()
    sessions = records("strands_trajectory.jsonl")
    for record in sessions:
        assert f">{record['session_id']}</h3>" in text
    hostile = tmp_path / "hostile.html"
    hostile.write_text(render([hostile_result()]))
    for path, count in ((page, len(sessions)), (hostile, 1)):
        done = chromium(path.as_uri(), "--dump-dom", tmp=tmp_path)
        assert done.returncode == 0, done.stderr[-2000:]
        # The DOM the browser built: every session section parsed (no markup from the trace
        # broke the page), nothing injected.
        assert done.stdout.count('<section class="session card"') == count, done.stdout[:500]
        assert "data-pwned" not in done.stdout
    dom = chromium(page.as_uri(), "--dump-dom", tmp=tmp_path).stdout
    assert dom.count('class="task card"') == 1
    artifacts = ROOT / "artifacts"
    artifacts.mkdir(exist_ok=True)
    shot = artifacts / "report.png"
    shot.unlink(missing_ok=True)
    done = chromium(page.as_uri(), "--window-size=1400,2400", f"--screenshot={shot}", tmp=tmp_path)
    assert done.returncode == 0 and shot.stat().st_size > 10_000


def test_the_summary_lists_what_is_outside_coverage_with_its_count():
    # A robustness verdict with no thresholds configured is not a coverage gap: the summary
    # shows no coverage for it (n/a, not 0%) and names it apart.
    page = render([hostile_result(), hostile_result()])
    summary = page.split('id="summary"', 1)[1]
    row = summary.split("<td>robustness</td>", 1)[1].split("</tr>", 1)[0]
    assert row.endswith("<td class=num>n/a</td><td class=num>n/a</td>"), row
    assert (
        "Outside coverage, nothing configured to judge against: robustness [no_thresholds] x2"
        in (summary)
    )
