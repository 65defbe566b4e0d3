"""The parsers of the `spanjudge` command line (ARCHITECTURE.md section 9, Contract).

argparse's parsers are slow to build (a formatter and gettext look-ups per argument): all five
took milliseconds of a small `spanjudge eval`, so `spanjudge.cli.main` builds only the parser of
the subcommand it runs when nothing before it could show the others (`command_of`), and none for
a plain eval command line (`spanjudge.cli_argv.plain_eval`, which reads eval's options as
`_add_eval` declares them).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from spanjudge._version import __version__
from spanjudge.cli_argv import COMMANDS, FORMATS, command_of

__all__ = ["FORMATS", "build_parser", "command_of"]

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
  spanjudge eval --expect expectations.yaml --format json --output report.json traces/*.jsonl
  spanjudge eval --format junit --output junit.xml --strict --fail-on-error traces.jsonl
"""


class _Parser(argparse.ArgumentParser):
    """argparse's parser, built without asking for the terminal's size: `add_argument` makes a
    formatter to check each argument's metavar, and argparse's formatter, made without a width,
    imports `shutil` (with zlib, bz2 and lzma) to ask the terminal. The check formats one
    argument, whatever the width; help, usage and errors are formatted as argparse does."""

    _adding = False

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        self._adding = True
        try:
            return super().add_argument(*args, **kwargs)
        finally:
            self._adding = False

    def _get_formatter(self) -> argparse.HelpFormatter:
        if self._adding:
            make: Any = self.formatter_class  # every HelpFormatter takes a width
            formatter: argparse.HelpFormatter = make(prog=self.prog, width=80)
            return formatter
        return super()._get_formatter()


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
    ev.add_argument("inputs", nargs="+", metavar="INPUT", help="OTLP JSON lines, .pb, or -")
    ev.add_argument("--config", metavar="FILE", help="spanjudge YAML configuration")
    ev.add_argument(
        "--expect",
        metavar="FILE",
        help='expectations file (JSON/YAML): {"sessions": {"<id or glob>": {"skills": [...]}}}',
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
        help="exit 1 also on a not_evaluated verdict that could have been judged (any reason"
        " but not_applicable) and on an input with no spans; stderr names them",
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
    from spanjudge.calibrate import add_parser

    calibrate = add_parser(sub)
    _verbose(calibrate)
    return calibrate


_COMMANDS: dict[str, Callable[[Any], argparse.ArgumentParser]] = dict(
    zip(COMMANDS, (_add_eval, _add_serve, _add_demo, _add_calibrate), strict=True)
)


def build_parser(
    command: str | None = None,
) -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The top-level parser and each subcommand's own (for usage messages that fit).

    With ``command`` only that subcommand's parser is built (argparse's parsers are slow to
    build: all five took milliseconds of a small `spanjudge eval`); `main` passes it when nothing
    before the subcommand could show the others (`command_of`)."""
    parser = _Parser(
        prog="spanjudge",
        description="Judge AI agents from their OpenTelemetry traces: skill loads, tool calls, "
        "trajectories. Verdicts are pass, fail or not_evaluated (with a reason); pass rates are "
        "always shown with their coverage.",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help=_VERBOSE_HELP)
    parser.add_argument("--version", action="version", version=f"spanjudge {__version__}")
    # prog: what argparse would format from the usage (no positionals yet), without a formatter
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", prog="spanjudge")
    sub.required = True

    names = [command] if command else list(_COMMANDS)
    return parser, {name: _COMMANDS[name](sub) for name in names}
