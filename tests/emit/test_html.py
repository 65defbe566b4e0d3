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
    # the page's one script is its own filter; the agent's text is never a script
    assert page.count("<script") == 1 and "<script>document" not in page
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


def _fixture_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    page = tmp_path / "report.html"
    main(
        [
            "eval",
            "--expect",
            str(STRANDS / "expectations.yaml"),
            "--format",
            "html",
            "--output",
            str(page),
            str(STRANDS / "strands_trajectory.jsonl"),
        ]
    )
    capsys.readouterr()
    return page


def _visible_sessions(dom: str) -> list[str]:
    """The ids of the session sections the filter left shown."""
    return re.findall(r'<section class="session card" id="(s\d+)">', dom)


def test_the_index_links_every_failing_session_and_durations_read_in_ms(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = _fixture_page(tmp_path, capsys).read_text()
    index = text[text.index('<section id="index"') :]
    index = index[: index.index("</section>")]
    assert "Failing sessions: 4 of 10" in index
    links = re.findall(r'<a href="#(s\d+)">([^<]+)</a> <span class="muted">([^<]+)</span>', index)
    assert [(name, failed) for _, name, failed in links] == [
        ("strands-default-duplicate-mutation", "side_effects"),
        ("strands-default-terminal-state-mismatch", "side_effects"),
        ("strands-default-csv-summary-seed-2", "outcome"),
        ("strands-default-csv-summary-seed-4", "skill_loaded, skill_omission"),
    ]
    for anchor, name, _ in links:
        assert f'<section class="session card" id="{anchor}"><h3>{name}</h3>' in text
    durations = re.search(r"<td>stats.duration_s</td>.*?</tr>", text)
    assert durations is not None
    cells = re.findall(r"<td class=num>([^<]*)</td>", durations.group(0))
    assert len(cells) == 4 and all(re.fullmatch(r"\d+(\.\d+)? ms", c) for c in cells), cells


@pytest.mark.slow
def test_the_filter_hides_what_does_not_match_in_headless_chromium(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if CHROMIUM is None:
        unavailable("chromium", "chromium is not installed (CI installs Debian chromium)")
    page = _fixture_page(tmp_path, capsys)
    unfiltered = chromium(page.as_uri(), "--dump-dom", tmp=tmp_path).stdout
    assert len(_visible_sessions(unfiltered)) == 10
    assert "10 of 10 session(s) shown" in unfiltered
    failing = chromium(page.as_uri() + "#outcome=fail", "--dump-dom", tmp=tmp_path).stdout
    assert len(_visible_sessions(failing)) == 4, failing[:300]
    assert "4 of 10 session(s) shown" in failing
    one = chromium(
        page.as_uri() + "#outcome=fail&evaluator=side_effects", "--dump-dom", tmp=tmp_path
    ).stdout
    shown = _visible_sessions(one)
    assert len(shown) == 2
    for sid in shown:
        section = one[one.index(f'id="{sid}"') :]
        section = section[: section.index("</section>")]
        rows = re.findall(
            r'<tr class="v" data-outcome="(\w+)" data-evaluator="(\w+)"( hidden="")?', section
        )
        visible = [(o, e) for o, e, hidden in rows if not hidden]
        assert visible == [("fail", "side_effects")]
        assert len(rows) > 1  # the others are there, hidden
    assert "2 of 10 session(s) shown" in one
