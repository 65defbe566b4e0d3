"""Agreement of each judge with the labelled fixture sessions (accuracy and Cohen's kappa).

Labels come from ``fixtures/*/scenarios.json`` (``labels``: the scripted ground truth written by
each fixture generator from its own execution log, never from spanjudge output). Every fixture
session is run through the real pipeline (`run_offline` + `Engine`) once per judge setup, and the
four judged evaluators' verdicts are compared with the labels:

- ``skill_selection``: per invoked skill, pass = right skill (label true);
- ``instruction_following``: per loaded skill, the five-level label (exact match; kappa unweighted);
- ``skill_omission``: when labelled, fail ("omitted") = a skill should have been used (true);
- ``outcome``: pass = correct final answer. Reference answers come from the scenarios.

``not_evaluated`` verdicts are not scored: they count against coverage, not accuracy.

Held out: the fixture folders in ``HELD_OUT`` were not looked at while the heuristic's rules and
thresholds were tuned; each figure is reported for the tuned part, the
held-out part and all sessions. LLM judges also get their latency per judgment and the share of
replies that could not be parsed.

Usage::

    python bench/bench_judges.py                       # the heuristic judge
    python bench/bench_judges.py --config judges.yaml  # also every judge named in that file
    python bench/bench_judges.py --json                # machine-readable
    python bench/bench_judges.py --judge openai --base-url http://127.0.0.1:8080/v1 \
        --model smollm2 --limit 12                     # a local OpenAI-compatible server
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from spanjudge.calibration import cohen_kappa
from spanjudge.config import parse_config
from spanjudge.emit.collecting import CollectingSink
from spanjudge.engine import Engine
from spanjudge.errors import JudgeError
from spanjudge.expectations import ExpectationResolver, SessionEntry, load_expectations_file
from spanjudge.judges.registry import judge_lookup
from spanjudge.offline import run_offline
from spanjudge.values import SessionResult

ROOT = Path(__file__).resolve().parent.parent
EVALUATORS = ("skill_selection", "skill_omission", "instruction_following", "outcome")
HELD_OUT = ("deepagents", "genai_manual")
PARTS = ("tuned", "held_out", "all")


class Timed:
    """A judge wrapper that records each judgment's latency and failure kind."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        # the judge's pool and deadline settings (evaluators/judging.py reads them)
        self.policy = getattr(inner, "policy", None)
        self.latencies_s: list[float] = []
        self.failures: Counter[str] = Counter()

    def judge(self, request: Any) -> Any:
        started = time.perf_counter()
        try:
            return self.inner.judge(request)
        except JudgeError as exc:
            self.failures[exc.error_type or "judge_error"] += 1
            raise
        finally:
            self.latencies_s.append(time.perf_counter() - started)


def _entries(folder: Path, records: list[dict[str, Any]]) -> list[SessionEntry]:
    path = folder / "expectations.yaml"
    entries = {e.pattern: e for e in load_expectations_file(str(path))} if path.exists() else {}
    for record in records:
        sid = record["session_id"]
        reference = record.get("reference_answer")
        entry = entries.get(sid) or SessionEntry(pattern=sid)
        if reference and not entry.reference_answer:
            entry = dataclasses.replace(entry, reference_answer=reference)
        entries[sid] = entry
    return list(entries.values())


def _verdicts(result: SessionResult, evaluator: str) -> list[Any]:
    return [v for v in result.verdicts if v.evaluator == evaluator]


def _by_skill(verdicts: list[Any], skill: str) -> Any:
    mine = [v for v in verdicts if (v.target.skill or "").lower() == skill.lower()]
    scored = [v for v in mine if v.outcome != "not_evaluated"]
    return (scored or mine or [None])[0]


def compare(record: dict[str, Any], result: SessionResult | None) -> list[tuple[str, Any, Any]]:
    """(evaluator, truth, prediction or None when not scored) for each label of one session."""
    labels = record.get("labels") or {}
    rows: list[tuple[str, Any, Any]] = []
    for skill, right in (labels.get("skill_selection") or {}).items():
        v = _by_skill(_verdicts(result, "skill_selection"), skill) if result else None
        pred = None if v is None or v.outcome == "not_evaluated" else v.outcome == "pass"
        rows.append(("skill_selection", bool(right), pred))
    for skill, level in (labels.get("instruction_following") or {}).items():
        v = _by_skill(_verdicts(result, "instruction_following"), skill) if result else None
        pred = None if v is None or v.outcome == "not_evaluated" else v.label
        rows.append(("instruction_following", level, pred))
    for evaluator, positive in (("skill_omission", "fail"), ("outcome", "pass")):
        truth = labels.get(evaluator)
        if truth is None:
            continue
        found = _verdicts(result, evaluator) if result else []
        v = found[0] if found else None
        pred = None if v is None or v.outcome == "not_evaluated" else v.outcome == positive
        rows.append((evaluator, bool(truth), pred))
    return rows


def _only_sessions(path: str, records: list[dict[str, Any]], tmp: Path) -> str:
    """A copy of ``path`` with only the lines that carry the given sessions (a slow judge is
    asked about those only)."""
    ids = [f'"{r["session_id"]}"' for r in records]
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    out = tmp / Path(path).name
    out.write_text("\n".join(x for x in lines if any(i in x for i in ids)) + "\n")
    return str(out)


def _part(rows: list[tuple[str, Any, Any, str]]) -> dict[str, Any]:
    report: dict[str, Any] = {}
    for evaluator in EVALUATORS:
        mine = [r for r in rows if r[0] == evaluator]
        scored = [(t, p) for _, t, p, _ in mine if p is not None]
        kappa = cohen_kappa(scored)
        report[evaluator] = {
            "labelled": len(mine),
            "scored": len(scored),
            "coverage": round(len(scored) / len(mine), 3) if mine else None,
            "accuracy": round(sum(t == p for t, p in scored) / len(scored), 3) if scored else None,
            "kappa": None if kappa is None else round(kappa, 3),
            "disagreements": [
                {"session": sid, "truth": t, "judged": p} for _, t, p, sid in mine if p != t
            ],
        }
    return report


def run_setup(
    config_doc: dict[str, Any],
    fixtures: Path,
    limit: int | None = None,
    only: Sequence[str] = (),
) -> dict[str, Any]:
    """Agreement per part (tuned, held out, all) and, for the judges used, latency and failures."""
    rows: dict[str, list[tuple[str, Any, Any, str]]] = {part: [] for part in PARTS}
    config = parse_config(config_doc)
    lookup = judge_lookup(config)
    timed: dict[int, Timed] = {}

    def judge_for(name: str) -> Any:
        judge = lookup(name)
        if judge is None:
            return None
        return timed.setdefault(id(judge), Timed(judge))

    for scenarios in sorted(fixtures.glob("*/scenarios.json")):
        folder = scenarios.parent
        if only and folder.name not in only:
            continue
        records = json.loads(scenarios.read_text())["sessions"]
        if limit is not None:
            records = records[:limit]
        engine = Engine(config, judge_for=judge_for)
        engine.add_expectations(ExpectationResolver(_entries(folder, records)))
        collect = CollectingSink()
        wanted = {r["file"] for r in records}
        inputs = sorted(str(p) for p in folder.glob("*.jsonl") if p.name in wanted)
        with tempfile.TemporaryDirectory() as tmp:
            if limit is not None:
                inputs = [_only_sessions(p, records, Path(tmp)) for p in inputs]
            run_offline(inputs, engine, collect)
        part = "held_out" if folder.name in HELD_OUT else "tuned"
        results = collect.by_session()
        for record in records:
            result = results.get(record["session_id"])
            for row in compare(record, result):
                rows[part].append((*row, record["session_id"]))
                rows["all"].append((*row, record["session_id"]))
    report: dict[str, Any] = {part: _part(rows[part]) for part in PARTS}
    latencies = sorted(x for t in timed.values() for x in t.latencies_s)
    failures: Counter[str] = Counter()
    for t in timed.values():
        failures.update(t.failures)
    asked = len(latencies)
    report["judgments"] = {
        "asked": asked,
        "latency_s_mean": round(sum(latencies) / asked, 3) if asked else None,
        "latency_s_p50": round(latencies[asked // 2], 3) if asked else None,
        "latency_s_max": round(latencies[-1], 3) if asked else None,
        "parse_failure_rate": round(failures["judge_unparseable"] / asked, 3) if asked else None,
        "failures": dict(failures),
    }
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", help="a spanjudge config whose `judges` are compared too")
    parser.add_argument(
        "--judge",
        choices=("heuristic", "openai"),
        default="heuristic",
        help="openai: also an OpenAI-compatible server (--base-url, --model)",
    )
    parser.add_argument("--base-url", default="http://127.0.0.1:8080/v1")
    parser.add_argument("--model", default="local")
    parser.add_argument("--timeout-s", type=float, default=120.0)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument(
        "--limit", type=int, help="judge only the first N sessions of each fixture folder"
    )
    parser.add_argument("--fixtures", default=str(ROOT / "fixtures"))
    parser.add_argument(
        "--only", action="append", default=[], metavar="FOLDER", help="only this fixture folder"
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--verbose", action="store_true", help="list disagreements")
    args = parser.parse_args(argv)
    setups: dict[str, dict[str, Any]] = {"heuristic": {}}
    if args.judge == "openai":
        spec = {
            "type": "openai",
            "base_url": args.base_url,
            "model": args.model,
            "timeout_s": args.timeout_s,
            "concurrency": args.concurrency,
            "deadline_s": 3600,  # measure every judgment, however slow
            "max_retries": 1,
        }
        setups[f"llm:{args.model}"] = {"judges": {"default": spec}}
    if args.config:
        doc = yaml.safe_load(Path(args.config).read_text()) or {}
        for name, spec in (doc.get("judges") or {}).items():
            setups[name] = {"judges": {"default": spec}}
    results = {
        name: run_setup(doc, Path(args.fixtures), args.limit, args.only)
        for name, doc in setups.items()
    }
    if args.json:
        json.dump(results, sys.stdout, indent=1, default=str)
        print()
        return 0
    print(
        f"{'judge':<22}{'evaluator':<23}{'part':<10}{'labelled':>9}{'scored':>7}"
        f"{'accuracy':>9}{'kappa':>7}"
    )
    for name, report in results.items():
        for evaluator in EVALUATORS:
            for part in PARTS:
                row = report[part][evaluator]
                acc = "-" if row["accuracy"] is None else f"{row['accuracy']:.3f}"
                kappa = "-" if row["kappa"] is None else f"{row['kappa']:.3f}"
                print(
                    f"{name:<22}{evaluator:<23}{part:<10}{row['labelled']:>9}{row['scored']:>7}"
                    f"{acc:>9}{kappa:>7}"
                )
                if args.verbose and part != "all":
                    for d in row["disagreements"]:
                        print(
                            f"{'':<24}{d['session']}: truth {d['truth']!r}, judged {d['judged']!r}"
                        )
        j = report["judgments"]
        print(
            f"{name:<22}judgments {j['asked']}, latency mean {j['latency_s_mean']} s, "
            f"p50 {j['latency_s_p50']} s, max {j['latency_s_max']} s, "
            f"parse failures {j['parse_failure_rate']}, failures {j['failures']}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
