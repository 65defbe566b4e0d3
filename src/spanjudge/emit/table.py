"""The terminal table: per session its trajectory line and verdicts, then the summary."""

from __future__ import annotations

import os
import shutil
import textwrap
from collections.abc import Sequence
from typing import Any, TextIO

from spanjudge.emit.summary import Summary, rates
from spanjudge.values import SessionResult, Verdict

_MARK = {"pass": "PASS", "fail": "FAIL", "not_evaluated": "NOT EVALUATED"}
_COLOUR = {"pass": "\033[32m", "fail": "\033[31m", "not_evaluated": "\033[33m"}
_RESET = "\033[0m"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.0f}%"


def _target(verdict: Verdict) -> str:
    t = verdict.target
    if t.skill:
        return t.skill
    if t.tool_call_id:
        return t.tool_call_id
    if t.turn is not None:
        return f"turn {t.turn}"
    return "session"


def _clip(text: str, width: int | None) -> str:
    text = " ".join(text.split())
    return text if width is None or len(text) <= width else text[: width - 1] + "…"


EXPLANATION_WIDTH = 90  # the line width of the demo's table on a terminal
PIPE_WIDTH = 100  # a file or a pipe has no width of its own: a common terminal's
_MIN_WIDTH = 60  # narrower, the columns would no longer hold their headings' words
_LEAD = 2 + 13 + 1 + 5 + 2 + 22 + 1 + 18 + 1  # where a verdict's explanation starts
_MIN_CELL = 40  # an explanation cell narrower than this goes on lines of its own, under its row


def terminal_width() -> int:
    """The table's line width: ``COLUMNS`` when set, else the terminal's, else `PIPE_WIDTH`
    (standard output is a file or a pipe)."""
    return max(_MIN_WIDTH, shutil.get_terminal_size((PIPE_WIDTH, 24)).columns)


def _fit(line: str, width: int | None) -> list[str]:
    """``line`` wrapped at ``width``, its continuation lines indented under its text."""
    if width is None or len(line) <= width:
        return [line]
    indent = " " * (len(line) - len(line.lstrip()) + 4)
    return textwrap.wrap(
        line, width, subsequent_indent=indent, break_on_hyphens=False, drop_whitespace=True
    ) or [line]


def use_colour(choice: bool | None, out: TextIO | None) -> bool:
    """``--color`` (True) and ``--no-color`` (False) decide; without either (None) the outcomes
    are coloured on a terminal, unless the ``NO_COLOR`` environment variable is set or the
    terminal says it has no colours (``TERM=dumb``, as for git and ls)."""
    if choice is not None:
        return choice
    plain = os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb"
    return out is not None and out.isatty() and not plain


def paint(outcome: str, text: str) -> str:
    """``text`` in the colour of ``outcome`` (pass green, fail red, not evaluated yellow)."""
    return _COLOUR[outcome] + text + _RESET


def _verdict_lines(verdict: Verdict, colour: bool, width: int | None) -> list[str]:
    """One verdict as a row of columns; the explanation wraps inside its cell (whole, never
    cut), or under the row when the line leaves it too little room."""
    mark = _MARK[verdict.outcome]
    score = "  -  " if verdict.score is None else f"{verdict.score:5.2f}"
    why = f"[{verdict.reason}] " if verdict.reason else ""
    text = " ".join((why + verdict.explanation).split())
    row = (
        f"  {mark:<13} {score}  {_clip(verdict.evaluator, 22):<22} "
        f"{_clip(_target(verdict), 18):<18} "
    )
    if width is None:
        lines = [row + text]
    elif width - _LEAD >= _MIN_CELL:
        cell = textwrap.wrap(text, width - _LEAD, break_on_hyphens=False) or [""]
        lines = [row + cell[0], *(" " * _LEAD + part for part in cell[1:])]
    else:
        under = textwrap.wrap(text, width - 6, break_on_hyphens=False)
        lines = [row.rstrip(), *("      " + part for part in under)]
    if colour:
        lines[0] = lines[0].replace(mark, paint(verdict.outcome, mark), 1)
    return lines


def failing(result: SessionResult) -> bool:
    return any(v.outcome == "fail" for v in result.verdicts)


def session_lines(
    result: SessionResult,
    colour: bool = False,
    width: int | None = EXPLANATION_WIDTH,
    only_failures: bool = False,
) -> list[str]:
    """One session's lines, fitted to ``width`` columns (None: each line whole, unwrapped);
    ``only_failures`` shows the failing verdicts and counts the others."""
    t = result.trajectory
    s = t.stats
    state = "complete" if t.complete else f"INCOMPLETE ({t.close_reason})"
    tokens = "?" if s.input_tokens is None else f"{s.input_tokens}+{s.output_tokens or 0}"
    lines = [
        *_fit(
            f"session {t.session_id}  [{state}; key: {t.session_key_source}"
            + (f"; task {t.task_id}" if t.task_id else "")
            + (f"; revision {t.revision}" if t.revision > 1 else "")
            + "]",
            width,
        ),
        *_fit(
            f"  turns {s.turns}  tool calls {s.tool_calls}  skill loads {s.skill_loads}  "
            f"model calls {s.model_calls}  tokens {tokens}  errors {s.errors}  "
            f"retries {s.retries}  backtracks {s.backtracks}  {s.duration_s:.2f}s",
            width,
        ),
    ]
    shown = [v for v in result.verdicts if v.outcome == "fail" or not only_failures]
    for verdict in shown:
        lines.extend(_verdict_lines(verdict, colour, width))
    if len(shown) < len(result.verdicts):
        rest = [v.outcome for v in result.verdicts if v not in shown]
        lines.append(
            f"  (+ {rest.count('pass')} pass, {rest.count('not_evaluated')} not evaluated;"
            " --show all lists them)"
        )
    cov = result.coverage
    lines.append(
        f"  coverage: expected skills loaded {cov.expected_skills_loaded}/{cov.expected_skills}, "
        f"invocations with body {cov.invocations_with_body}/{cov.skill_invocations}"
    )
    lines[-1:] = _fit(lines[-1], width)
    return lines


def summary_lines(summary: Summary, input_report: dict[str, Any] | None = None) -> list[str]:
    lines = [
        "",
        f"{summary.sessions} session(s); verdicts: {summary.verdicts['pass']} pass, "
        f"{summary.verdicts['fail']} fail, {summary.verdicts['not_evaluated']} not evaluated",
        f"  {'evaluator':<22} {'pass':>5} {'fail':>5} {'n/e':>5}"
        f"  {'pass rate':>9}  {'coverage':>8}",
    ]
    sampled = False
    for name, counts in summary.by_evaluator.items():
        pass_rate, coverage = rates(counts)
        share = summary.sampled_share(name)
        sampled = sampled or share is not None
        lines.append(
            f"  {name:<22} {counts['pass']:>5} {counts['fail']:>5} {counts['not_evaluated']:>5}"
            f"  {_pct(pass_rate):>9}  {_pct(coverage):>8}"
            + ("" if share is None else f"  sampled {_pct(share)}")
        )
    for title, rows in summary.set_apart():
        listed = ", ".join(f"{evaluator} [{reason}] x{n}" for evaluator, reason, n in rows)
        lines.append(f"  outside coverage, {title}: {listed}")
    lines.append(
        "  (pass rate = pass / (pass + fail); coverage = (pass + fail) / the verdicts that could"
    )
    lines.append("   have been judged, i.e. all but those outside coverage; n/e = not evaluated)")
    if sampled:
        lines.append(
            "  (sampled = the sessions judged / the sessions seen, where the evaluator's sample"
            " or filter left some out)"
        )
    lines.extend(judge_usage_lines(summary))
    for profile in summary.tasks.values():
        lines.extend(task_lines(profile.to_json()))
    if input_report and input_report.get("skipped"):
        lines.append(f"skipped {input_report['skipped']} invalid span(s)/line(s) (--skip-invalid)")
    return lines


def judge_usage_lines(summary: Summary) -> list[str]:
    """What the LLM judges cost, per evaluator and per judge (nothing when none was asked)."""
    if not summary.usage_by_judge:
        return []
    lines = [
        f"  {'judge usage':<22} {'calls':>6} {'tokens in':>10} {'tokens out':>10}"
        f" {'latency':>9} {'cost':>10}"
    ]
    for title, totals in (
        ("evaluator", summary.usage_by_evaluator),
        ("judge", summary.usage_by_judge),
    ):
        for name, usage in totals.items():
            cost = "-" if usage.cost is None else f"{usage.cost:.6g}"
            about = "~" if usage.estimated else ""  # the endpoint reported no token counts
            lines.append(
                f"  {title + ' ' + name:<22} {usage.calls:>6} {about + str(usage.input_tokens):>10}"
                f" {about + str(usage.output_tokens):>10} {usage.latency_s:>8.1f}s"
                f" {about + cost:>10}"
            )
    if any(u.estimated for u in summary.usage_by_judge.values()):
        lines.append("  ~ estimated: the judge's endpoint reported no token counts")
    return lines


_RUN_MARK = {"pass": "P", "fail": "F", "not_evaluated": "-"}
_MAX_RUNS_SHOWN = 20  # beyond this the per-run strip would not fit a terminal line


def _num(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.4g}" if isinstance(value, float) and not value.is_integer() else f"{value:g}"


def task_lines(task: dict[str, Any]) -> list[str]:
    """The per-task profile: each component's distribution across the task's runs, in seed order.

    Evaluators: the outcome of every run (P pass, F fail, - not evaluated), pass rate with its
    counts, pass^k for k = the judged runs (all of k runs pass), coverage and the score spread.
    Statistics and measures: min, median, max, spread and the value of every run.
    """
    runs = task["runs"]
    seeds = [
        str(s) if s is not None else "-" for s in task.get("run_seeds") or task.get("seeds") or []
    ]
    shown = runs <= _MAX_RUNS_SHOWN
    order = f", seeds {' '.join(seeds)}" if seeds and shown else ""
    lines = ["", f"task {task['task_id']}: {runs} run(s){order}"]
    width = max(9, 2 * min(runs, _MAX_RUNS_SHOWN))
    evaluators = {n: c for n, c in task["components"].items() if c["kind"] == "evaluator"}
    # Measures that stayed 0 in every run (no deletes, no violations) would only add noise.
    others = {
        n: c
        for n, c in task["components"].items()
        if c["kind"] != "evaluator" and c.get("n") and (c["kind"] == "statistic" or c["max"])
    }
    col = max([22, *(len(n) for n in [*evaluators, *others])])
    if evaluators:
        lines.append(
            f"  {'evaluator':<{col}} {'runs':<{width}} {'pass rate':>14}  {'pass^k':>11}  "
            f"{'coverage':>8}  score min/median/max"
        )
    for name, comp in evaluators.items():
        judged = comp["pass"] + comp["fail"]
        strip = (
            " ".join(_RUN_MARK.get(o, "?") for o in comp["outcomes"])
            if shown
            else (f"{comp['pass']}P {comp['fail']}F {comp['not_evaluated']}-")
        )
        rate = f"{_pct(comp['pass_rate'])} ({comp['pass']}/{judged})"
        k = comp["pass_hat_k"].get(str(judged))
        hat = f"k={judged}: {_pct(k)}" if judged else "n/a"
        score = comp["score"]
        spread = (
            f"{score['min']:.2f} / {score['median']:.2f} / {score['max']:.2f}"
            if score.get("n")
            else "-"
        )
        lines.append(
            f"  {name:<{col}} {strip:<{width}} {rate:>14}  {hat:>11}  {_pct(comp['coverage']):>8}  "
            f"{spread}"
        )
    if others:
        lines.append(
            f"  {'measure':<{col}} {'min':>9} {'median':>9} {'max':>9} {'spread':>9}"
            + ("  per run" if shown else "")
        )
    for name, comp in others.items():
        per_run = "  " + " ".join(_num(v) for v in comp.get("values", [])) if shown else ""
        lines.append(
            f"  {name:<{col}} {_num(comp['min']):>9} {_num(comp['median']):>9} "
            f"{_num(comp['max']):>9} {_num(comp['spread']):>9}{per_run}"
        )
    return lines


def render_table(
    results: Sequence[SessionResult], colour: bool = False, width: int | None = EXPLANATION_WIDTH
) -> str:
    """The whole table for a list of results (the demo and small runs); ``width`` as in
    `session_lines`."""
    summary = Summary()
    lines: list[str] = []
    for result in results:
        summary.add(result)
        lines.extend(session_lines(result, colour, width))
        lines.append("")
    lines.extend(fit for line in summary_lines(summary) for fit in _fit(line, width))
    return "\n".join(lines) + "\n"


class TableWriter:
    """``show``: "all" sessions, only the "failures" (sessions with a failing verdict, and in
    them the failing verdicts), or only the "summary"; the summary counts every session."""

    def __init__(
        self,
        out: TextIO,
        colour: bool = False,
        width: int | None = EXPLANATION_WIDTH,
        show: str = "all",
    ) -> None:
        self.out = out
        self.colour = colour
        self.width = width
        self.show = show
        self.hidden = 0

    def begin(self) -> None:
        pass

    def session(self, result: SessionResult) -> None:
        if self.show == "summary" or (self.show == "failures" and not failing(result)):
            self.hidden += 1
            return
        lines = session_lines(result, self.colour, self.width, self.show == "failures")
        self.out.write("\n".join(lines) + "\n\n")

    def end(self, summary: Summary, input_report: dict[str, Any]) -> None:
        lines = summary_lines(summary, input_report)
        if self.hidden:
            what = "with no failing verdict " if self.show == "failures" else ""
            lines.append(
                f"{self.hidden} session(s) {what}not listed (--show {self.show}); "
                "--show all lists every session"
            )
        fitted = [fit for line in lines for fit in _fit(line, self.width)]
        self.out.write("\n".join(fitted) + "\n")
