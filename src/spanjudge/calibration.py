"""The computation behind `spanjudge calibrate` (`spanjudge.calibrate`): labels, and the
agreement of each evaluator and judge with them (accuracy, Cohen's kappa, confusion, coverage).
The labels file's format is in `spanjudge.calibrate`'s docstring and `spanjudge calibrate --help`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from spanjudge.errors import InputError, not_utf8
from spanjudge.reasons import OPT_IN_EVALUATORS
from spanjudge.spans.text import valid_yaml_strings

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
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: {not_utf8(exc)}") from None
    try:
        import yaml

        doc = yaml.safe_load(text)
    except Exception as exc:  # yaml.YAMLError and friends: the message names line and column
        raise InputError(f"{path}: not valid YAML/JSON: {exc}") from None
    doc = valid_yaml_strings(doc, text)
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


def run(
    labels: Sequence[Label], inputs: Sequence[str], config: Any, expect: str | None = None
) -> list[dict[str, Any]]:
    from spanjudge.emit.collecting import CollectingSink
    from spanjudge.engine import Engine
    from spanjudge.expectations import ExpectationResolver, load_expectations_file
    from spanjudge.offline import run_offline

    wanted = {lab.evaluator for lab in labels if lab.evaluator in OPT_IN_EVALUATORS}
    extra: dict[str, Any] = {name: {} for name in wanted if name not in config.evaluators}
    engine = Engine(replace(config, evaluators={**config.evaluators, **extra}))
    if expect:
        engine.add_expectations(ExpectationResolver(load_expectations_file(expect)))
    keep = CollectingSink()
    run_offline(list(inputs), engine, keep)
    return compare(labels, keep.by_session())
