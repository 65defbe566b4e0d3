"""`spanjudge calibrate LABELS TRACES...`: how far each evaluator and judge agrees with hand labels.

Before alerting on a judge, measure it: this runs the recorded sessions through the configured
evaluators and judges (as `spanjudge eval` does) and compares every labelled verdict with its
label. Per evaluator and judge it reports accuracy, Cohen's kappa, the confusion counts
(expected -> judged) and coverage (the share of labels that got a verdict to compare: a label
whose verdict is missing or ``not_evaluated``, when a scored one was expected, counts against
coverage, not accuracy).

Labels file (YAML or JSON)::

    sessions:
      <session id>:
        outcome: pass                       # an outcome: pass | fail | not_evaluated
        instruction_following: {csv-report: mostly}   # per skill; a level for this evaluator
        skill_selection: {csv-report: pass}
        tool_parameters: {write_file#1: fail, read_csv#1: pass}   # TOOL#N: the Nth call of TOOL

An expected value is an outcome, or a verdict label (the levels of instruction_following are
labels). Evaluators named in the labels that are opt-in (tool_selection, tool_parameters) are
switched on for the run.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from spanjudge.errors import InputError
from spanjudge.reasons import OPT_IN_EVALUATORS

OUTCOME_VALUES = ("pass", "fail", "not_evaluated")


@dataclass(frozen=True, slots=True, kw_only=True)
class Label:
    """One expected verdict: ``target`` is None (the evaluator's only verdict), a skill name or
    ``TOOL#N``."""

    session_id: str
    evaluator: str
    target: str | None
    expected: str


def load_labels(path: str) -> list[Label]:
    """Read and validate a labels file; every problem is reported at once with its place."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{path}: cannot read the labels file: {exc.strerror or exc}") from None
    try:
        import yaml

        doc = yaml.safe_load(text)
    except Exception as exc:  # yaml.YAMLError and friends: the message names line and column
        raise InputError(f"{path}: not valid YAML/JSON: {exc}") from None
    sessions = doc.get("sessions") if isinstance(doc, Mapping) else None
    if not isinstance(sessions, Mapping) or not sessions:
        raise InputError(f"{path}: expected a top-level 'sessions' mapping of session id -> labels")
    problems: list[str] = []
    labels: list[Label] = []
    for sid, by_evaluator in sessions.items():
        where = f"{path}: sessions.{sid}"
        if not isinstance(by_evaluator, Mapping):
            problems.append(f"{where}: expected a mapping of evaluator -> expected verdict")
            continue
        for evaluator, expected in by_evaluator.items():
            items = expected.items() if isinstance(expected, Mapping) else [(None, expected)]
            for target, value in items:
                at = f"{where}.{evaluator}" + (f".{target}" if target is not None else "")
                if not isinstance(value, str) or not value.strip():
                    problems.append(f"{at}: expected an outcome or a label, got {value!r}")
                    continue
                labels.append(
                    Label(
                        session_id=str(sid),
                        evaluator=str(evaluator),
                        target=None if target is None else str(target),
                        expected=value.strip(),
                    )
                )
    if problems:
        raise InputError("; ".join(problems))
    return labels


def _match(label: Label, verdicts: Sequence[Any]) -> Any:
    mine = [v for v in verdicts if v.evaluator == label.evaluator]
    if label.target is not None:
        tool, sep, nth = label.target.partition("#")
        if sep and nth.isdigit():
            mine = [
                v
                for v in mine
                if (v.details or {}).get("tool") == tool
                and (v.details or {}).get("call") == int(nth)
            ]
        else:
            key = label.target.strip().lower()
            mine = [v for v in mine if (v.target.skill or "").strip().lower() == key]
    scored = [v for v in mine if v.outcome != "not_evaluated"]
    return (scored or mine or [None])[0]


def judged_value(label: Label, verdict: Any) -> str | None:
    """What the verdict says in the label's terms: its outcome, or its label."""
    if verdict is None:
        return None
    if label.expected in OUTCOME_VALUES or verdict.outcome == "not_evaluated":
        return str(verdict.outcome)
    return str(verdict.label)


def cohen_kappa(pairs: Sequence[tuple[str, str]]) -> float | None:
    """Unweighted kappa of (expected, judged) pairs; None when chance agreement is total."""
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


@dataclass(slots=True)
class Agreement:
    """One evaluator and judge against its labels."""

    evaluator: str
    judge: str
    labelled: int = 0
    pairs: list[tuple[str, str]] = field(default_factory=list)
    disagreements: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        scored = len(self.pairs)
        confusion: dict[str, dict[str, int]] = {}
        for truth, got in self.pairs:
            row = confusion.setdefault(truth, {})
            row[got] = row.get(got, 0) + 1
        kappa = cohen_kappa(self.pairs)
        agree = sum(t == p for t, p in self.pairs)
        return {
            "evaluator": self.evaluator,
            "judge": self.judge,
            "labelled": self.labelled,
            "scored": scored,
            "coverage": round(scored / self.labelled, 3) if self.labelled else None,
            "accuracy": round(agree / scored, 3) if scored else None,
            "kappa": None if kappa is None else round(kappa, 3),
            "confusion": confusion,
            "disagreements": self.disagreements,
        }


def compare(labels: Iterable[Label], results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per (evaluator, judge): agreement of the verdicts in ``results`` (session id -> result)."""
    table: dict[tuple[str, str], Agreement] = {}
    for label in labels:
        result = results.get(label.session_id)
        verdict = _match(label, result.verdicts) if result is not None else None
        judge = str(verdict.judge) if verdict is not None else "-"
        row = table.setdefault((label.evaluator, judge), Agreement(label.evaluator, judge))
        row.labelled += 1
        got = judged_value(label, verdict)
        where = {"session": label.session_id, "target": label.target, "expected": label.expected}
        if got is None or (got == "not_evaluated" and label.expected != "not_evaluated"):
            row.disagreements.append({**where, "judged": got, "why": "no verdict to compare"})
            continue
        row.pairs.append((label.expected, got))
        if got != label.expected:
            row.disagreements.append({**where, "judged": got})
    return [table[k].to_json() for k in sorted(table)]


class _Keep:
    def __init__(self) -> None:
        self.results: dict[str, Any] = {}

    def begin(self) -> None:
        pass

    def session(self, result: Any) -> None:
        self.results[result.trajectory.session_id] = result

    def end(self, summary: Any, input_report: Any) -> None:
        pass


def run(
    labels: Sequence[Label], inputs: Sequence[str], config: Any, expect: str | None = None
) -> list[dict[str, Any]]:
    from spanjudge.engine import Engine
    from spanjudge.expectations import ExpectationResolver, load_expectations_file
    from spanjudge.offline import run_offline

    wanted = {lab.evaluator for lab in labels if lab.evaluator in OPT_IN_EVALUATORS}
    extra: dict[str, Any] = {name: {} for name in wanted if name not in config.evaluators}
    engine = Engine(replace(config, evaluators={**config.evaluators, **extra}))
    if expect:
        engine.add_expectations(ExpectationResolver(load_expectations_file(expect)))
    keep = _Keep()
    run_offline(list(inputs), engine, keep)
    return compare(labels, keep.results)


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """The ``calibrate`` subcommand (cheap to build: nothing heavy is imported here)."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "calibrate",
        help="agreement of each evaluator and judge with hand labels (accuracy, kappa, coverage)",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
        epilog="labels file:\n" + (__doc__ or "").split("Labels file (YAML or JSON)::")[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("labels", metavar="LABELS", help="labels file (YAML or JSON)")
    parser.add_argument("inputs", nargs="+", metavar="TRACES", help="OTLP JSON lines or .pb")
    parser.add_argument("--config", metavar="FILE", help="spanjudge YAML configuration")
    parser.add_argument("--expect", metavar="FILE", help="expectations file (reference answers)")
    parser.add_argument("--format", choices=("table", "json"), default="table")
    return parser


def cmd_calibrate(args: argparse.Namespace, out: Any = None) -> int:
    from spanjudge.config import load_config

    out = out or sys.stdout
    labels = load_labels(args.labels)
    rows = run(labels, args.inputs, load_config(args.config), args.expect)
    if args.format == "json":
        json.dump({"labels": len(labels), "agreement": rows}, out, indent=1)
        out.write("\n")
        return 0
    out.write(
        f"{'evaluator':<23}{'judge':<20}{'labelled':>9}{'scored':>7}{'coverage':>9}"
        f"{'accuracy':>9}{'kappa':>7}  confusion (expected->judged: n)\n"
    )
    for row in rows:
        cells = [
            "-" if row[k] is None else f"{row[k]:.3f}" for k in ("coverage", "accuracy", "kappa")
        ]
        confusion = ", ".join(
            f"{t}->{p}: {n}" for t, got in row["confusion"].items() for p, n in got.items()
        )
        out.write(
            f"{row['evaluator']:<23}{row['judge']:<20}{row['labelled']:>9}{row['scored']:>7}"
            f"{cells[0]:>9}{cells[1]:>9}{cells[2]:>7}  {confusion}\n"
        )
    return 0
