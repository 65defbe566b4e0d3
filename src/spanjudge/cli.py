"""The `spanjudge` command line (ARCHITECTURE.md section 9, Contract).

Each command imports the parts it runs (the engine and the report writers for eval, the sidecar
for serve), so one command does not load the others'.
"""

from __future__ import annotations

import argparse
import logging
import os
import stat
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import NoReturn

from spanjudge.calibrate import cmd_calibrate
from spanjudge.cli_parser import build_parser
from spanjudge.errors import ConfigError, InputError, OutputError, SpanJudgeError
from spanjudge.gate import (
    EXIT_FAIL,
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_USAGE,
    Tally,
    TallyingWriter,
    decide,
)


def _input_bytes(paths: Sequence[str]) -> int | None:
    """The total size of the inputs when it is known up front (plain regular files only)."""
    total = 0
    for path in paths:
        if path == "-" or path.endswith(".gz"):
            return None
        try:
            info = os.stat(path)
        except OSError:
            return None
        if not stat.S_ISREG(info.st_mode):
            return None
        total += info.st_size
    return total


def cmd_eval(args: argparse.Namespace) -> int:
    from spanjudge.cli_output import LoggingWriter, Spool, make_writer, write_report
    from spanjudge.config import load_config
    from spanjudge.emit.table import use_colour
    from spanjudge.engine import Engine
    from spanjudge.expectations import ExpectationResolver, load_expectations_files
    from spanjudge.offline import run_offline
    from spanjudge.spans.files import expand_inputs

    log = logging.getLogger("spanjudge.cli")  # -v: INFO, -vv: DEBUG (`main` sets the level)
    config = load_config(args.config)
    log.info("configuration: %s", args.config or "none (the embedded defaults)")
    engine = Engine(config)
    if args.expect:
        engine.add_expectations(ExpectationResolver(load_expectations_files(args.expect)))
        log.info("expectations: %s", ", ".join(args.expect))
    log.debug("evaluators: %s", ", ".join(e.name for e in engine.evaluators))
    to_stdout = args.output in (None, "-")
    colour = args.format == "table" and use_colour(args.color, sys.stdout if to_stdout else None)
    inputs = expand_inputs(args.inputs)  # a directory: its trace files
    for path in inputs:
        size = _input_bytes([path])
        log.info("reading %s%s", path, "" if size is None else f" ({size:,} bytes)")

    def on_skip(message: str) -> None:
        print(f"spanjudge: skipped: {message}", file=sys.stderr)

    tally = Tally()
    # The result is written only when the whole input was read: a bad line later in a file
    # must not leave half a report behind (exit 2 prints nothing as if it were a result).
    buf = Spool()
    try:
        writer = make_writer(args.format, buf, colour, args.strict, args.show)  # type: ignore[arg-type]
        summary, stats = run_offline(
            inputs,
            engine,
            TallyingWriter(LoggingWriter(writer, log) if args.verbose > 1 else writer, tally),
            skip_invalid=args.skip_invalid,
            progress=sys.stderr.isatty() and not args.quiet,
            on_skip=on_skip,
            total_bytes=_input_bytes(inputs),
        )
        log.info(
            "read %d file(s): %d line(s), %d span(s); %d session(s) evaluated",
            stats.files,
            stats.lines,
            stats.spans,
            summary.sessions,
        )
        code, reasons = decide(summary, tally, strict=args.strict, fail_on_error=args.fail_on_error)
        if to_stdout:
            try:
                buf.copy_to(sys.stdout)
                sys.stdout.flush()
                log.info("%s report written to stdout", args.format)
            except BrokenPipeError:
                # `spanjudge eval ... | head`: the reader left, the verdicts stand. Point stdout
                # at /dev/null so the interpreter's final flush does not complain.
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        else:
            write_report(args.output, buf)
    finally:
        buf.close()
    if stats.skipped:
        print(
            f"spanjudge: skipped {stats.skipped} invalid line(s)/span(s); "
            "see the report's input section",
            file=sys.stderr,
        )
    if stats.duplicate_spans:
        print(
            f"spanjudge: {stats.duplicate_spans} span(s) repeated an id already read (first copy "
            "kept); see the report's input section",
            file=sys.stderr,
        )
    if stats.log_records_unread:
        print(
            f"spanjudge: {sum(stats.log_records_unread.values())} log record(s) not read as"
            " content; see the report's input section",
            file=sys.stderr,
        )
    if summary.sessions == 0:
        # A gate that saw nothing must not look like a gate that passed; spans read but none
        # an agent's is another fault (an unknown layout: see docs/conventions.md) than none.
        only_logs = " (only log records: give the traces too)" if stats.log_records else ""
        found = (
            f"read {stats.spans} span(s) from {', '.join(args.inputs)}, none recognised as an"
            " agent's"
            if stats.spans
            else f"no spans found in {', '.join(args.inputs)}{only_logs}"
        )
        print(
            f"spanjudge: warning: {found}; nothing was evaluated"
            + (" (--strict: failing)" if args.strict else ""),
            file=sys.stderr,
        )
        return EXIT_FAIL if args.strict else EXIT_OK
    if not to_stdout:
        v = summary.verdicts
        print(
            f"spanjudge: wrote {args.format} report to {args.output}: {summary.sessions}"
            f" session(s); {v['pass']} pass, {v['fail']} fail, {v['not_evaluated']} not evaluated",
            file=sys.stderr,
        )
    for line in reasons:
        print(line, file=sys.stderr)
    return code


def cmd_serve(args: argparse.Namespace, rest: Sequence[str], in_process: bool = False) -> int:
    from spanjudge import sidecar

    argv = list(rest)
    if args.config:
        argv = ["--config", args.config, *argv]
    if args.verbose and not any(a == "--log-level" or a.startswith("--log-level=") for a in argv):
        argv = ["--log-level", "DEBUG", *argv]
    # the command's own process ends after it, a caller's goes on (`sidecar.main`)
    code: int = sidecar.main(argv, process_ends=not in_process)
    return code


def cmd_demo(args: argparse.Namespace) -> int:
    from spanjudge import demo

    colour = {True: ["--color"], False: ["--no-color"], None: []}[args.color]
    code: int = demo.main(colour)
    return code


def _set_up_logging(verbose: int) -> Callable[[], None]:
    """Log on stderr as ``spanjudge: LEVEL: message``, spanjudge's loggers at the level -v asks
    for; returns what puts a caller's logging back as it was."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    logging.basicConfig(level=logging.WARNING, format="spanjudge: %(levelname)s: %(message)s")
    added = [h for h in root.handlers if h not in handlers]
    ours = logging.getLogger("spanjudge")
    before = ours.level
    ours.setLevel({0: logging.WARNING, 1: logging.INFO}.get(verbose, logging.DEBUG))

    def undo() -> None:
        ours.setLevel(before)
        root.setLevel(level)
        for handler in added:
            root.removeHandler(handler)

    return undo


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default: this process's) and return its exit status;
    usage errors and --help raise `SystemExit` as argparse does."""
    # Called with arguments, from a caller's process: its logging is put back on return. The
    # command's own process (argv None) keeps the set-up to the end: atexit hooks log too.
    in_process = argv is not None
    parser, commands = build_parser()
    args, rest = parser.parse_known_args(argv)
    if rest and args.command != "serve":
        # The subcommand's usage, not the top level's: that is where the flag was looked for.
        commands[args.command].error(f"unrecognized arguments: {' '.join(rest)}")
    args.verbose += args.sub_verbose
    # serve sets up its own logging (--log-level)
    undo_logging = None if args.command == "serve" else _set_up_logging(args.verbose)
    try:
        if args.command == "eval":
            return cmd_eval(args)
        if args.command == "serve":
            return cmd_serve(args, rest, in_process)
        if args.command == "calibrate":
            return cmd_calibrate(args)
        return cmd_demo(args)
    except (ConfigError, InputError, OutputError) as exc:
        hint = ""
        wrong_signal = "spanjudge reads traces" in str(exc)  # skipping would skip it all
        if (
            isinstance(exc, InputError)
            and not isinstance(exc, OutputError)
            and exc.line
            and not wrong_signal
        ):
            hint = " (--skip-invalid skips bad lines and spans, counting them)"
        print(f"spanjudge: error: {exc}{hint}", file=sys.stderr)
        return EXIT_USAGE
    except SpanJudgeError as exc:
        print(f"spanjudge: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        # Not the user's mistake and not a verdict: a distinct status, so a gate can tell.
        if args.verbose:
            traceback.print_exc(file=sys.stderr)
        print(
            f"spanjudge: internal error: {type(exc).__name__}: {exc} (a bug in spanjudge;"
            " -v prints the traceback; exit 3)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL
    finally:
        if in_process and undo_logging is not None:
            undo_logging()


def console() -> NoReturn:
    """The `spanjudge` command: the console script and `python -m spanjudge` (`main` is for
    a caller's process: it returns the status and leaves the process's logging as it was)."""
    sys.exit(main())


if __name__ == "__main__":
    console()
