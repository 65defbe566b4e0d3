"""The argparse parsers of the `spanjudge` command line (ARCHITECTURE.md section 9, Contract)."""

from __future__ import annotations

import argparse
from typing import Any

from spanjudge._version import __version__
from spanjudge.calibrate import add_parser

__all__ = ["COMMANDS", "FORMATS", "SHOW", "build_parser"]

COMMANDS = ("eval", "serve", "demo", "calibrate")
FORMATS = ("table", "json", "junit", "html")
SHOW = ("failures", "all", "summary")  # what the table lists (`emit.table.TableWriter`)

EVAL_EPILOG = """\
inputs:
  OTLP JSON lines, as the OpenTelemetry Collector `file` exporter writes them (hex ids) or as
  protobuf's JSON mapping writes them (base64 ids); `.gz` files are decompressed; `.pb` files hold
  OTLP protobuf (one ExportTraceServiceRequest, or the file exporter's length-prefixed records);
  `-` reads JSON lines from standard input.

exit status:
  0  no verdict failed
  1  at least one verdict failed (with --strict: or a verdict that could have been judged was
     not evaluated; with --fail-on-error: or an evaluator raised); stderr says which
  2  bad usage, bad configuration or unreadable input (the message names file, line and field)
  3  an internal error in spanjudge (one line says so; -v prints the traceback)

examples:
  spanjudge eval traces.jsonl
  spanjudge eval --show all traces/
  spanjudge eval --expect expectations.yaml --format json --output report.json traces/*.jsonl
  spanjudge eval --format junit --output junit.xml --strict --fail-on-error traces.jsonl
"""


_VERBOSE_HELP = (
    "log what is read, found and written on stderr (-vv: and each session; serve: --log-level"
    " DEBUG)"
)


def _verbose(parser: argparse.ArgumentParser) -> None:
    # Accepted before or after the subcommand: both counts add up (`spanjudge -v eval -v`).
    parser.add_argument(
        "-v", "--verbose", action="count", dest="sub_verbose", default=0, help=_VERBOSE_HELP
    )


def _colour_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--color",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="colour the outcomes (default: on a terminal, unless NO_COLOR is set or TERM=dumb)",
    )


def _add_eval(sub: Any) -> argparse.ArgumentParser:
    ev: argparse.ArgumentParser = sub.add_parser(
        "eval",
        help="evaluate recorded OTLP files and print a report (exit code gates a release)",
        description="Evaluate every session in recorded OTLP trace files.",
        epilog=EVAL_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ev.add_argument(
        "inputs",
        nargs="+",
        metavar="INPUT",
        help="OTLP JSON lines, .pb, a directory (its *.jsonl, *.json, *.pb and *.gz files), or -",
    )
    ev.add_argument("--config", metavar="FILE", help="spanjudge YAML configuration")
    ev.add_argument(
        "--expect",
        metavar="FILE",
        action="append",
        help='expectations file (JSON/YAML): {"sessions": {"<id or glob>": {"skills": [...],'
        ' "trajectory": {"tools": [...], "match": "in_order"}, "assertions": ["..."]}}};'
        " repeatable: the files are merged; a pattern two files set differently is an error",
    )
    ev.add_argument(
        "--format", choices=FORMATS, default="table", help="report format (default: table)"
    )
    ev.add_argument(
        "--output",
        "-o",
        metavar="FILE",
        help="write the report to FILE (default: stdout); a regular file is replaced"
        " atomically, /dev/stdout, a FIFO or a device is written through",
    )
    ev.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 also on a not_evaluated verdict that could have been judged (not one with"
        " nothing configured to judge against, e.g. no_budget, nor one whose question did not"
        " arise, e.g. not_applicable or not_invoked, nor one a sample or filter left out,"
        " not_sampled or filtered_out) and on an input with no spans; stderr names them",
    )
    ev.add_argument(
        "--fail-on-error",
        action="store_true",
        help="exit 1 when an evaluator raised (verdicts not_evaluated [evaluator_error])",
    )
    ev.add_argument(
        "--skip-invalid",
        action="store_true",
        help="skip invalid lines/spans instead of stopping; "
        "they are counted in the report and on stderr",
    )
    ev.add_argument(
        "--show",
        choices=SHOW,
        default="failures",
        help="what the table lists: failures = the sessions with a failing verdict, and those"
        " verdicts; all = every session and verdict; summary = the summary alone. Default:"
        " failures, what needs looking at first (the summary still counts every session and a"
        " last line says how many were not listed). The other formats always hold everything",
    )
    ev.add_argument("--quiet", "-q", action="store_true", help="no progress indicator")
    _colour_option(ev)
    _verbose(ev)
    return ev


def _add_serve(sub: Any) -> argparse.ArgumentParser:
    sv: argparse.ArgumentParser = sub.add_parser(
        "serve",
        help="run the OTLP sidecar (receives traces from a Collector, exports verdicts)",
        add_help=False,  # `spanjudge serve --help` is the sidecar's own, complete help
    )
    sv.add_argument("--config", metavar="FILE")
    _verbose(sv)
    return sv


def _add_demo(sub: Any) -> argparse.ArgumentParser:
    demo: argparse.ArgumentParser = sub.add_parser(
        "demo",
        help="run a bundled example agent through the in-process processor and print its verdicts",
        description="Runs a scripted, instrumented example agent (no network, no API key) through "
        "SpanJudgeProcessor on the embedded defaults and prints the verdict table.",
    )
    _colour_option(demo)
    _verbose(demo)
    return demo


def _add_calibrate(sub: Any) -> argparse.ArgumentParser:
    calibrate = add_parser(sub)
    _verbose(calibrate)
    return calibrate


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The top-level parser and each subcommand's own (for usage messages that fit)."""
    parser = argparse.ArgumentParser(
        prog="spanjudge",
        description="Judge AI agents from their OpenTelemetry traces: skill loads, tool calls, "
        "trajectories. Verdicts are pass, fail or not_evaluated (with a reason); pass rates are "
        "always shown with their coverage.",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help=_VERBOSE_HELP)
    parser.add_argument("--version", action="version", version=f"spanjudge {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    adders = (_add_eval, _add_serve, _add_demo, _add_calibrate)
    return parser, {name: add(sub) for name, add in zip(COMMANDS, adders, strict=True)}
