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
import logging
import sys
from typing import Any

log = logging.getLogger("spanjudge.cli")  # -v: INFO, as `eval -v` says what it read


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """The ``calibrate`` subcommand's parser."""
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
    from spanjudge.calibration import load_labels, run
    from spanjudge.config import load_config

    out = out or sys.stdout
    labels = load_labels(args.labels)
    log.info("labels: %d from %s", len(labels), args.labels)
    config = load_config(args.config)
    log.info("configuration: %s", args.config or "none (the embedded defaults)")
    for path in args.inputs:
        log.info("reading %s", path)
    rows = run(labels, args.inputs, config, args.expect)
    log.info("%d evaluator/judge pair(s) compared", len(rows))
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
