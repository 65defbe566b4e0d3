"""`spanjudge eval --format html`: one self-contained page (inline CSS and SVG, no external assets).

Sessions are streamed as they are evaluated: each gets a timeline of its steps (turns, model
calls, skill loads, tool calls; errors, retries and backtracks flagged) with the verdicts that
cite a step beside it, and the full verdict list. At the end come the summary and the per-task
profiles (each component of the trajectory vector drawn as a distribution across runs); CSS
`order` shows them above the sessions. `not_evaluated` is drawn hollow and dashed, in grey, with
its reason, never like a pass or a fail.

Everything that came from the agent (names, arguments, results, answers, ids) is untrusted and
goes through `markup.html_escape` (what `html.escape` gives); element ids are generated, never
taken from the trace.

Above the summary (CSS `order` again: it is written at the end, once known) come an index of the
failing sessions and a filter by outcome and evaluator. The filter is the page's one script,
inline and written here: it only reads the `data-` attributes of the verdict rows and hides what
does not match; the choice is kept in the address (`#outcome=fail&evaluator=cost`), so a
filtered view can be linked to.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TextIO

from spanjudge._version import __version__
from spanjudge.emit.markup import html_escape
from spanjudge.emit.summary import Summary, rates
from spanjudge.trajectory.steps import Step
from spanjudge.values import SessionResult, Verdict

MAX_STEPS = 400  # per session timeline; the rest is counted, not drawn
MAX_TEXT = 2000  # characters of arguments/results shown per step
_OUTCOME_CLASS = {"pass": "o-pass", "fail": "o-fail", "not_evaluated": "o-ne"}
_OUTCOME_TEXT = {"pass": "PASS", "fail": "FAIL", "not_evaluated": "NOT EVALUATED"}

CSS = """
:root{--pass:#1a7f37;--fail:#cf222e;--ne:#6e7781;--bg:#fff;--fg:#1f2328;--muted:#656d76;
--line:#d0d7de;font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;font-size:14px}
body{margin:0;background:var(--bg);color:var(--fg)}
main{display:flex;flex-direction:column;gap:16px;padding:16px;max-width:1400px;margin:auto}
#head{order:0}#index{order:1}#summary{order:2}#tasks{order:3}#sessions{order:4}
h1{font-size:20px;margin:0}h2{font-size:17px;margin:8px 0}h3{font-size:15px;margin:4px 0}
section.card{border:1px solid var(--line);border-radius:6px;padding:10px 12px}
table{border-collapse:collapse;width:100%}td,th{text-align:left;padding:3px 6px;
vertical-align:top;border-bottom:1px solid #eaeef2}th{font-weight:600;color:var(--muted)}
.num{text-align:right;font-variant-numeric:tabular-nums}.muted{color:var(--muted)}
.badge{display:inline-block;padding:0 6px;border-radius:10px;font-size:12px;font-weight:600;
border:1px solid;white-space:nowrap}
.o-pass{color:#fff;background:var(--pass);border-color:var(--pass)}
.o-fail{color:#fff;background:var(--fail);border-color:var(--fail)}
.o-ne{color:var(--ne);background:repeating-linear-gradient(45deg,#fff,#fff 3px,#eaeef2 3px,
#eaeef2 6px);border:1px dashed var(--ne)}
svg .o-pass{fill:var(--pass);stroke:var(--pass)}svg .o-fail{fill:var(--fail);stroke:var(--fail)}
svg .o-ne{fill:#fff;stroke:var(--ne);stroke-dasharray:2 2}
.flag{font-size:11px;font-weight:600;padding:0 4px;border-radius:3px;margin-left:3px}
.f-error{background:#ffebe9;color:var(--fail)}.f-retry{background:#fff8c5;color:#7d4e00}
.f-backtrack{background:#ddf4ff;color:#0550ae}
.k-agent_turn{fill:#8250df}.k-model_call{fill:#bf8700}.k-tool_call{fill:#0969da}
.k-skill_load{fill:#1a7f37}.k-final_answer{fill:#57606a}.bar-error{stroke:var(--fail);
stroke-width:2}
details pre{white-space:pre-wrap;word-break:break-all;max-height:240px;overflow:auto;
background:#f6f8fa;padding:6px;margin:2px 0}
.expl{max-width:640px}
#index ol{margin:4px 0;padding-left:22px;columns:2 320px}#filter{display:flex;gap:12px;
align-items:center;flex-wrap:wrap;margin-top:8px}
"""

# The filter (see the module's docstring). Plain DOM; nothing from the trace is evaluated.
SCRIPT = """
(function(){
var outcome=document.getElementById("f-outcome"),evaluator=document.getElementById("f-evaluator");
var count=document.getElementById("f-count");
function apply(){
  var o=outcome.value,e=evaluator.value,all=o==="all"&&e==="all",shown=0;
  var sessions=document.querySelectorAll("section.session");
  sessions.forEach(function(s){
    var any=false;
    s.querySelectorAll("tr.v").forEach(function(r){
      var ok=(o==="all"||r.dataset.outcome===o)&&(e==="all"||r.dataset.evaluator===e);
      r.hidden=!ok&&!all;any=any||ok;
    });
    s.hidden=!(all||any);if(!s.hidden){shown++;}
  });
  count.textContent=shown+" of "+sessions.length+" session(s) shown";
}
function fromAddress(){
  var h=new URLSearchParams(location.hash.slice(1));
  if(!h.has("outcome")&&!h.has("evaluator")){return;}
  [[outcome,h.get("outcome")],[evaluator,h.get("evaluator")]].forEach(function(p){
    var ok=Array.prototype.some.call(p[0].options,function(x){return x.value===p[1];});
    p[0].value=ok?p[1]:"all";
  });
}
function change(){
  history.replaceState(null,"","#outcome="+encodeURIComponent(outcome.value)+
    "&evaluator="+encodeURIComponent(evaluator.value));
  apply();
}
outcome.addEventListener("change",change);evaluator.addEventListener("change",change);
window.addEventListener("hashchange",function(){fromAddress();apply();});
fromAddress();apply();
})();
"""


def duration(seconds: float) -> str:
    """A duration as people read one: "7.5 ms" under a second, else "2.35 s"."""
    if abs(seconds) < 1:
        return f"{seconds * 1000:.3g} ms"
    return f"{seconds:.3g} s" if abs(seconds) < 100 else f"{seconds:.0f} s"


def _e(value: Any) -> str:
    return html_escape("" if value is None else str(value))


def _clip(text: str, limit: int = MAX_TEXT) -> str:
    return text if len(text) <= limit else text[:limit] + f"… ({len(text) - limit} more chars)"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.0f}%"


def _badge(outcome: str) -> str:
    return f'<span class="badge {_OUTCOME_CLASS[outcome]}">{_OUTCOME_TEXT[outcome]}</span>'


def _jsonish(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, indent=1, default=str)


class HtmlWriter:
    """Streaming writer: `begin()`, `session(result)` per session, `end(summary, input_report)`."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.count = 0
        self.failing: list[tuple[int, str, list[str]]] = []  # the index: number, id, evaluators

    def begin(self) -> None:
        self.out.write(
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width,initial-scale=1">'
            f"<title>spanjudge report</title><style>{CSS}</style></head><body><main>"
            f'<header id="head"><h1>spanjudge report</h1><div class="muted">spanjudge '
            f"{_e(__version__)}; verdicts are pass, fail or not evaluated (with a reason); "
            "pass rate = pass / (pass + fail), always shown with its coverage</div></header>"
            '<div id="sessions"><h2>Sessions</h2>\n'
        )

    def session(self, result: SessionResult) -> None:
        self.count += 1
        failed = [v.evaluator for v in result.verdicts if v.outcome == "fail"]
        if failed:
            self.failing.append((self.count, result.trajectory.session_id, failed))
        self.out.write(session_html(result, self.count) + "\n")

    def end(self, summary: Summary, input_report: dict[str, Any]) -> None:
        self.out.write("</div>\n")
        self.out.write(index_html(self.failing, self.count, list(summary.by_evaluator)))
        self.out.write(summary_html(summary, input_report))
        tasks = [p.to_json() for p in summary.tasks.values()]
        self.out.write('<div id="tasks">')
        if tasks:
            self.out.write("<h2>Tasks: distributions across repeated runs</h2>")
        for i, task in enumerate(tasks, 1):
            self.out.write(task_html(task, i))
        self.out.write(f"</div></main><script>{SCRIPT}</script></body></html>\n")


def index_html(
    failing: list[tuple[int, str, list[str]]], sessions: int, evaluators: list[str]
) -> str:
    """The failing sessions, each linked to its section with the evaluators that failed it,
    and the filter's controls."""
    items = "".join(
        f'<li><a href="#s{n}">{_e(session_id)}</a> '
        f'<span class="muted">{_e(", ".join(dict.fromkeys(names)))}</span></li>'
        for n, session_id, names in failing
    )
    listing = (
        f"<ol>{items}</ol>" if failing else '<p class="muted">no session has a failing verdict</p>'
    )
    outcomes = "".join(
        f'<option value="{o}">{label}</option>'
        for o, label in (
            ("all", "any outcome"),
            *((o, t.lower()) for o, t in _OUTCOME_TEXT.items()),
        )
    )
    names = "".join(f'<option value="{_e(n)}">{_e(n)}</option>' for n in evaluators)
    return (
        f'<section id="index" class="card"><h2>Failing sessions: {len(failing)} of {sessions}'
        f"</h2>{listing}"
        '<div id="filter"><label>show verdicts <select id="f-outcome">'
        f"{outcomes}</select></label>"
        '<label>of <select id="f-evaluator"><option value="all">every evaluator</option>'
        f'{names}</select></label><span id="f-count" class="muted"></span></div></section>\n'
    )


def summary_html(summary: Summary, input_report: dict[str, Any]) -> str:
    v = summary.verdicts
    rows = []
    for name, counts in summary.by_evaluator.items():
        pass_rate, coverage = rates(counts)
        share = summary.sampled_share(name)
        sampled = "" if share is None else f" <span class=muted>(sampled {_pct(share)})</span>"
        rows.append(
            f"<tr><td>{_e(name)}</td><td class=num>{counts['pass']}</td>"
            f"<td class=num>{counts['fail']}</td><td class=num>{counts['not_evaluated']}</td>"
            f"<td class=num>{_pct(pass_rate)}</td><td class=num>{_pct(coverage)}{sampled}</td></tr>"
        )
    skipped = input_report.get("skipped") if input_report else None
    note = f"<p>skipped {_e(skipped)} invalid line(s)/span(s)</p>" if skipped else ""
    for title, set_apart in summary.set_apart():
        listed = ", ".join(f"{_e(name)} [{_e(reason)}] x{n}" for name, reason, n in set_apart)
        note += f"<p>Outside coverage, {_e(title)}: {listed}</p>"
    return (
        f'<section id="summary" class="card"><h2>Summary</h2><p>{summary.sessions} session(s), '
        f"{summary.complete} complete; verdicts: {_badge('pass')} {v['pass']} "
        f"{_badge('fail')} {v['fail']} {_badge('not_evaluated')} {v['not_evaluated']}</p>"
        "<table><tr><th>evaluator</th><th class=num>pass</th><th class=num>fail</th>"
        "<th class=num>not evaluated</th><th class=num>pass rate</th><th class=num>coverage</th>"
        f"</tr>{''.join(rows)}</table><p class=muted>coverage = (pass + fail) / the verdicts that"
        " could have been judged: not those with nothing configured to judge against, nor those"
        " whose question did not arise, nor the sessions an evaluator's sample or filter left out"
        f" (the sampled share is given beside coverage)</p>{note}</section>\n"
    )


def _verdict_row(v: Verdict, anchors: dict[str, str]) -> str:
    score = "-" if v.score is None else f"{v.score:.2f}"
    reason = f'<span class="muted">[{_e(v.reason)}]</span> ' if v.reason else ""
    target = (
        v.target.skill
        or v.target.tool_call_id
        or (f"turn {v.target.turn}" if v.target.turn is not None else "session")
    )
    links = " ".join(
        f'<a href="#{anchors[s]}">{_e(s[:8])}</a>' if s in anchors else _e(s[:8])
        for s in v.evidence[:12]
    )
    return (
        f'<tr class="v" data-outcome="{v.outcome}" data-evaluator="{_e(v.evaluator)}">'
        f"<td>{_badge(v.outcome)}</td><td>{_e(v.evaluator)}</td><td>{_e(target)}</td>"
        f"<td class=num>{score}</td><td>{_e(v.label)}</td>"
        f'<td class="expl">{reason}{_e(v.explanation)}</td><td>{links}</td></tr>'
    )


def _step_flags(step: Step, retries: set[str], backtracks: set[str]) -> str:
    flags = []
    if step.kind in ("tool_call", "skill_load") and step.failed:
        flags.append('<span class="flag f-error">error</span>')
    if step.span_id in retries:
        flags.append('<span class="flag f-retry">retry</span>')
    if step.span_id in backtracks:
        flags.append('<span class="flag f-backtrack">backtrack</span>')
    return "".join(flags)


def _step_label(step: Step) -> str:
    if step.kind == "skill_load":
        return f"{_e(step.name)}: <b>{_e(step.skill)}</b> ({_e(step.skill_status)})"
    if step.kind == "model_call":
        tokens = ""
        if step.input_tokens is not None or step.output_tokens is not None:
            tokens = f" {step.input_tokens or 0}+{step.output_tokens or 0} tok"
        return f"{_e(step.model or step.name)}{_e(tokens)}"
    return _e(step.name)


def _step_detail(step: Step) -> str:
    parts = []
    if step.kind in ("agent_turn", "final_answer", "model_call") and step.text:
        parts.append(("text", step.text))
    if step.arguments is not None:
        parts.append(("arguments", _jsonish(step.arguments)))
    if step.result is not None:
        parts.append(("result", step.result))
    if step.error:
        parts.append(("error", step.error))
    if not parts:
        return ""
    body = "".join(f"<div class=muted>{k}</div><pre>{_e(_clip(t))}</pre>" for k, t in parts)
    return f"<details><summary>show</summary>{body}</details>"


def session_html(result: SessionResult, index: int) -> str:
    t = result.trajectory
    s = t.stats
    sid = f"s{index}"
    steps = list(t.steps)
    anchors = {st.span_id: f"{sid}-{i}" for i, st in enumerate(steps[:MAX_STEPS])}
    t0 = min((st.start_unix_nano for st in steps), default=0)
    t1 = max((st.end_unix_nano for st in steps), default=t0)
    span = max(1, t1 - t0)
    retries, backtracks = set(t.retry_span_ids), set(t.backtrack_span_ids)
    cited: dict[str, list[Verdict]] = {}
    for v in result.verdicts:
        for span_id in dict.fromkeys(
            [*v.evidence, *([v.target.span_id] if v.target.span_id else [])]
        ):
            cited.setdefault(span_id, []).append(v)
    rows = []
    for i, st in enumerate(steps[:MAX_STEPS]):
        x = 300 * (st.start_unix_nano - t0) / span
        w = max(2.0, 300 * (st.end_unix_nano - st.start_unix_nano) / span)
        err = " bar-error" if st.kind in ("tool_call", "skill_load") and st.failed else ""
        bar = (
            f'<svg width="304" height="12" role="img"><rect x="{x:.1f}" y="1" width="{w:.1f}" '
            f'height="10" rx="2" class="k-{_e(st.kind)}{err}"/></svg>'
        )
        beside = " ".join(
            f'<span class="badge {_OUTCOME_CLASS[v.outcome]}" title="{_e(v.explanation)}">'
            f"{_e(v.evaluator)}</span>"
            for v in cited.get(st.span_id, [])
        )
        rows.append(
            f'<tr id="{sid}-{i}"><td class=num>{st.turn}</td><td>{_e(st.kind)}</td>'
            f"<td>{_step_label(st)}{_step_flags(st, retries, backtracks)}</td>"
            f"<td class=num>{(st.start_unix_nano - t0) / 1e6:.1f}</td><td>{bar}</td>"
            f"<td>{beside}</td><td>{_step_detail(st)}</td></tr>"
        )
    more = ""
    if len(steps) > MAX_STEPS:
        more = f"<p class=muted>{len(steps) - MAX_STEPS} more step(s) not drawn</p>"
    state = "complete" if t.complete else f"INCOMPLETE ({_e(t.close_reason)})"
    task = f"; task {_e(t.task_id)}" if t.task_id else ""
    seed = f", seed {_e(t.run_seed)}" if t.run_seed else ""
    tokens = "?" if s.input_tokens is None else f"{s.input_tokens}+{s.output_tokens or 0}"
    answer = ""
    if t.final_answer:
        answer = f"<p><span class=muted>final answer:</span> {_e(_clip(t.final_answer, 600))}</p>"
    verdicts = "".join(_verdict_row(v, anchors) for v in result.verdicts)
    return (
        f'<section class="session card" id="{sid}"><h3>{_e(t.session_id)}</h3>'
        f'<div class="muted">{state}; key {_e(t.session_key_source)}{task}{seed}; turns {s.turns}, '
        f"tool calls {s.tool_calls}, skill loads {s.skill_loads}, model calls {s.model_calls}, "
        f"tokens {tokens}, errors {s.errors}, retries {s.retries}, backtracks {s.backtracks}, "
        f"{duration(s.duration_s)}</div>{answer}"
        "<table><tr><th>verdict</th><th>evaluator</th><th>target</th><th class=num>score</th>"
        f"<th>label</th><th>explanation</th><th>evidence</th></tr>{verdicts}</table>"
        "<h3>Timeline</h3><table><tr><th class=num>turn</th><th>kind</th><th>step</th>"
        "<th class=num>ms</th><th>time</th><th>verdicts</th><th></th></tr>"
        f"{''.join(rows)}</table>{more}</section>"
    )


def _strip(outcomes: list[str], labels: list[str]) -> str:
    dots = "".join(
        f'<circle cx="{10 + 18 * i}" cy="10" r="7" class="{_OUTCOME_CLASS.get(o, "o-ne")}">'
        f"<title>{_e(labels[i] if i < len(labels) else i)}: {_e(o)}</title></circle>"
        for i, o in enumerate(outcomes)
    )
    return f'<svg width="{20 + 18 * len(outcomes)}" height="20" role="img">{dots}</svg>'


def _general(value: float) -> str:
    return f"{value:g}"


def _dotplot(comp: dict[str, Any], labels: list[str], show: Callable[[float], str]) -> str:
    values = comp.get("values") or []
    lo, hi = comp.get("min"), comp.get("max")
    if lo is None or hi is None:
        return ""
    width = 260
    scale = (hi - lo) or 1.0

    def x(v: float) -> float:
        return 10 + width * ((v - lo) / scale if hi != lo else 0.5)

    dots = "".join(
        f'<circle cx="{x(v):.1f}" cy="12" r="5" fill="#0969da" fill-opacity="0.55">'
        f"<title>{_e(labels[i] if i < len(labels) else i)}: {show(v)}</title></circle>"
        for i, v in enumerate(values)
        if v is not None
    )
    med = comp.get("median")
    tick = (
        ""
        if med is None
        else f'<line x1="{x(med):.1f}" x2="{x(med):.1f}" y1="2" y2="22" stroke="#1f2328"/>'
    )
    return (
        f'<svg width="{width + 20}" height="24" role="img"><line x1="10" x2="{width + 10}" y1="12" '
        f'y2="12" stroke="#d0d7de"/>{tick}{dots}</svg>'
    )


def task_html(task: dict[str, Any], index: int) -> str:
    seeds = [str(s) if s is not None else "-" for s in task.get("run_seeds") or []]
    sessions = task.get("sessions") or []
    labels = [
        f"seed {seeds[i]} ({sessions[i]})" if i < len(seeds) else str(i)
        for i in range(len(sessions))
    ]
    rows, stats = [], []
    for name, comp in task["components"].items():
        if comp["kind"] == "evaluator":
            judged = comp["pass"] + comp["fail"]
            k = comp["pass_hat_k"].get(str(judged))
            score = comp["score"]
            spread = (
                f"{score['min']:.2f} / {score['median']:.2f} / {score['max']:.2f}"
                if score.get("n")
                else "-"
            )
            rows.append(
                f"<tr><td>{_e(name)}</td><td>{_strip(comp['outcomes'], labels)}</td>"
                f"<td class=num>{_pct(comp['pass_rate'])} ({comp['pass']}/{judged})</td>"
                f"<td class=num>{'n/a' if not judged else f'k={judged}: {_pct(k)}'}</td>"
                f"<td class=num>{_pct(comp['coverage'])}</td><td class=num>{spread}</td></tr>"
            )
        elif comp.get("n") and (comp["kind"] == "statistic" or comp["max"]):
            show = duration if name.endswith("duration_s") else _general
            stats.append(
                f"<tr><td>{_e(name)}</td><td>{_dotplot(comp, labels, show)}</td>"
                f"<td class=num>{show(comp['min'])}</td><td class=num>{show(comp['median'])}</td>"
                f"<td class=num>{show(comp['max'])}</td><td class=num>{show(comp['spread'])}</td>"
                "</tr>"
            )
    return (
        f'<section class="task card" id="t{index}"><h3>task {_e(task["task_id"])}: '
        f"{task['runs']} run(s)</h3><div class=muted>runs in seed order: {_e(', '.join(seeds))}; "
        "filled = pass/fail, hollow dashed = not evaluated; pass^k = chance that k runs all pass"
        "</div><table><tr><th>evaluator</th><th>runs</th><th class=num>pass rate</th>"
        "<th class=num>pass^k</th><th class=num>coverage</th><th class=num>score min/median/max"
        f"</th></tr>{''.join(rows)}</table><table><tr><th>measure</th><th>runs (median line)"
        "</th><th class=num>min</th><th class=num>median</th><th class=num>max</th>"
        f"<th class=num>spread</th></tr>{''.join(stats)}</table></section>"
    )
