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

Usage::

    python bench/bench_judges.py                       # the heuristic judge
    python bench/bench_judges.py --config judges.yaml  # also every judge named in that file
    python bench/bench_judges.py --json                # machine-readable
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from spanjudge.config import parse_config
from spanjudge.emit.summary import Summary
from spanjudge.engine import Engine
from spanjudge.expectations import ExpectationResolver, SessionEntry, load_expectations_file
from spanjudge.offline import run_offline
from spanjudge.values import SessionResult

ROOT = Path(__file__).resolve().parent.parent
EVALUATORS = ("skill_selection", "skill_omission", "instruction_following", "outcome")


class Collect:
    """A report writer that keeps the results."""

    def __init__(self) -> None:
        self.results: dict[str, SessionResult] = {}

    def begin(self) -> None:
        pass

    def session(self, result: SessionResult) -> None:
        self.results[result.trajectory.session_id] = result

    def end(self, summary: Summary, input_report: dict[str, Any]) -> None:
        pass


def cohen_kappa(pairs: Sequence[tuple[Any, Any]]) -> float | None:
    """Unweighted kappa of (truth, prediction) pairs; None when chance agreement is total."""
    n = len(pairs)
    if not n:
        return None
    observed = sum(1 for t, p in pairs if t == p) / n
    truth = Counter(t for t, _ in pairs)
    pred = Counter(p for _, p in pairs)
    expected = sum(truth[k] * pred.get(k, 0) for k in truth) / (n * n)
    if expected >= 1.0:
        return None
    return (observed - expected) / (1.0 - expected)


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


def run_setup(config_doc: dict[str, Any], fixtures: Path) -> dict[str, Any]:
    rows: list[tuple[str, Any, Any, str]] = []
    for scenarios in sorted(fixtures.glob("*/scenarios.json")):
        folder = scenarios.parent
        records = json.loads(scenarios.read_text())["sessions"]
        engine = Engine(parse_config(config_doc))
        engine.add_expectations(ExpectationResolver(_entries(folder, records)))
        collect = Collect()
        run_offline(sorted(str(p) for p in folder.glob("*.jsonl")), engine, collect)
        for record in records:
            result = collect.results.get(record["session_id"])
            rows += [(*row, record["session_id"]) for row in compare(record, result)]
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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", help="a spanjudge config whose `judges` are compared too")
    parser.add_argument("--fixtures", default=str(ROOT / "fixtures"))
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--verbose", action="store_true", help="list disagreements")
    args = parser.parse_args(argv)
    setups: dict[str, dict[str, Any]] = {"heuristic": {}}
    if args.config:
        doc = yaml.safe_load(Path(args.config).read_text()) or {}
        for name, spec in (doc.get("judges") or {}).items():
            setups[name] = {"judges": {"default": spec}}
    results = {name: run_setup(doc, Path(args.fixtures)) for name, doc in setups.items()}
    if args.json:
        json.dump(results, sys.stdout, indent=1, default=str)
        print()
        return 0
    print(f"{'judge':<14}{'evaluator':<24}{'labelled':>9}{'scored':>8}{'accuracy':>10}{'kappa':>8}")
    for name, report in results.items():
        for evaluator, row in report.items():
            acc = "-" if row["accuracy"] is None else f"{row['accuracy']:.3f}"
            kappa = "-" if row["kappa"] is None else f"{row['kappa']:.3f}"
            print(
                f"{name:<14}{evaluator:<24}{row['labelled']:>9}{row['scored']:>8}"
                f"{acc:>10}{kappa:>8}"
            )
            if args.verbose:
                for d in row["disagreements"]:
                    print(f"{'':<16}{d['session']}: truth {d['truth']!r}, judged {d['judged']!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
