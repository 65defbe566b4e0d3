"""The `spanjudge` command line (ARCHITECTURE.md section 9, Contract)."""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from typing import IO, TextIO

from spanjudge.config import load_config
from spanjudge.errors import ConfigError, InputError, OutputError, SpanJudgeError
from spanjudge.expectations import ExpectationResolver, load_expectations_file

FORMATS = ("table", "json", "junit", "html")
EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2

EVAL_EPILOG = """\
inputs:
  OTLP JSON lines, as the OpenTelemetry Collector `file` exporter writes them (hex ids) or as
  protobuf's JSON mapping writes them (base64 ids); `.gz` files are decompressed; `.pb` files hold
  OTLP protobuf (one ExportTraceServiceRequest, or the file exporter's length-prefixed records);
  `-` reads JSON lines from standard input.

exit status:
  0  no verdict failed
  1  at least one verdict failed (with --strict: or any verdict was not evaluated)
  2  bad usage, bad configuration or unreadable input (the message names file, line and field)

examples:
  spanjudge eval traces.jsonl
  spanjudge eval --expect expectations.yaml --format json --output report.json traces/*.jsonl
  spanjudge eval --format junit --output junit.xml --strict traces.jsonl
"""


def _writer(fmt: str, out: TextIO, colour: bool, strict: bool) -> object:
    if fmt == "json":
        from spanjudge.emit.report import JsonReportWriter

        return JsonReportWriter(out)
    if fmt == "junit":
        from spanjudge.emit.junit import JunitWriter

        return JunitWriter(out, strict=strict)
    if fmt == "html":
        from spanjudge.emit.html import HtmlWriter  # type: ignore[import-not-found,unused-ignore]

        return HtmlWriter(out)
    from spanjudge.emit.table import TableWriter

    return TableWriter(out, colour=colour)


def cmd_eval(args: argparse.Namespace) -> int:
    from spanjudge.engine import Engine
    from spanjudge.offline import run_offline

    config = load_config(args.config)
    engine = Engine(config)
    if args.expect:
        engine.add_expectations(ExpectationResolver(load_expectations_file(args.expect)))
    to_terminal = args.output in (None, "-") and sys.stdout.isatty()
    colour = to_terminal and args.format == "table" and not os.environ.get("NO_COLOR")

    def on_skip(message: str) -> None:
        print(f"spanjudge: skipped: {message}", file=sys.stderr)

    # The result is written only when the whole input was read: a bad line later in a file
    # must not leave half a report behind (exit 2 prints nothing as if it were a result).
    with tempfile.SpooledTemporaryFile(
        max_size=16 * 1024 * 1024, mode="w+", encoding="utf-8"
    ) as buf:
        writer = _writer(args.format, buf, colour, args.strict)  # type: ignore[arg-type]
        summary, stats = run_offline(
            args.inputs,
            engine,
            writer,  # type: ignore[arg-type]
            skip_invalid=args.skip_invalid,
            progress=sys.stderr.isatty() and not args.quiet,
            on_skip=on_skip,
        )
        buf.seek(0)
        if args.output in (None, "-"):
            shutil.copyfileobj(buf, sys.stdout)
            sys.stdout.flush()
        else:
            _write_atomically(args.output, buf)
    if stats.skipped:
        print(
            f"spanjudge: skipped {stats.skipped} invalid line(s)/span(s); "
            "see the report's input section",
            file=sys.stderr,
        )
    if summary.sessions == 0:
        # A gate that saw nothing must not look like a gate that passed.
        print(
            f"spanjudge: warning: no spans found in {', '.join(args.inputs)}; nothing was evaluated"
            + (" (--strict: failing)" if args.strict else ""),
            file=sys.stderr,
        )
        return EXIT_FAIL if args.strict else EXIT_OK
    if summary.failed:
        return EXIT_FAIL
    if args.strict and summary.not_evaluated:
        return EXIT_FAIL
    return EXIT_OK


def _write_atomically(path: str, buf: IO[str]) -> None:
    """Write the report next to ``path`` first, then rename: never half a report."""
    tmp = f"{path}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as handle:
            shutil.copyfileobj(buf, handle)
        os.replace(tmp, path)
    except OSError as exc:
        raise OutputError(f"cannot write the report: {exc.strerror}", file=path) from None
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def cmd_serve(args: argparse.Namespace, rest: Sequence[str]) -> int:
    from spanjudge import sidecar

    argv = list(rest)
    if args.config:
        argv = ["--config", args.config, *argv]
    code: int = sidecar.main(argv)
    return code


def cmd_demo(args: argparse.Namespace) -> int:
    from spanjudge import demo

    code: int = demo.main([])
    return code


def _version() -> str:
    from spanjudge._version import __version__

    return __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="spanjudge",
        description="Judge AI agents from their OpenTelemetry traces: skill loads, tool calls, "
        "trajectories. Verdicts are pass, fail or not_evaluated (with a reason); pass rates are "
        "always shown with their coverage.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress and internals")
    parser.add_argument("--version", action="version", version=f"spanjudge {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    ev = sub.add_parser(
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
        "--output", "-o", metavar="FILE", help="write the report to FILE (default: stdout)"
    )
    ev.add_argument("--strict", action="store_true", help="exit 1 on any not_evaluated verdict too")
    ev.add_argument(
        "--skip-invalid",
        action="store_true",
        help="skip invalid lines/spans instead of stopping; "
        "they are counted in the report and on stderr",
    )
    ev.add_argument("--quiet", "-q", action="store_true", help="no progress indicator")

    sv = sub.add_parser(
        "serve",
        help="run the OTLP sidecar (receives traces from a Collector, exports verdicts)",
        add_help=False,
    )
    sv.add_argument("--config", metavar="FILE")
    sub.add_parser(
        "demo",
        help="run a bundled example agent through the in-process processor and print its verdicts",
        description="Runs a scripted, instrumented example agent (no network, no API key) through "
        "SpanJudgeProcessor on the embedded defaults and prints the verdict table.",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if argv[:1] == ["serve"]:
        args, rest = parser.parse_known_args(argv)
    else:
        args, rest = parser.parse_args(argv), []
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="spanjudge: %(levelname)s: %(message)s",
    )
    try:
        if args.command == "eval":
            return cmd_eval(args)
        if args.command == "serve":
            return cmd_serve(args, rest)
        return cmd_demo(args)
    except (ConfigError, InputError, OutputError) as exc:
        hint = ""
        if isinstance(exc, InputError) and not isinstance(exc, OutputError) and exc.line:
            hint = " (--skip-invalid skips bad lines and spans, counting them)"
        print(f"spanjudge: error: {exc}{hint}", file=sys.stderr)
        return EXIT_USAGE
    except SpanJudgeError as exc:
        print(f"spanjudge: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
