"""The `spanjudge` command line (ARCHITECTURE.md section 9, Contract).

Only what a command needs is imported: `spanjudge eval` of a small file must start about as fast
as Python itself (`bench/bench_startup.py`), so the engine, the writers and the sidecar are
imported inside the command that uses them.
"""

from __future__ import annotations

import gc
import os
import stat
import sys
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence

# The console script's process (`console`): the thresholds the collector had before start-up
# raised them, put back for a command that runs for long (serve); None in a caller's process.
_gc_found: tuple[int, int, int] | None = None
# Allocations between young-generation collections while the command starts: imports build
# hundreds of thousands of objects and almost no cyclic garbage (offline.py uses the same
# figure during a run).
_START_GC_THRESHOLD = 50_000


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
    from spanjudge.expectations import ExpectationResolver, load_expectations_file
    from spanjudge.gate import EXIT_FAIL, EXIT_OK, Tally, TallyingWriter, decide
    from spanjudge.logs import logger
    from spanjudge.offline import run_offline

    # -v: INFO, -vv: DEBUG; without -v nothing is logged here, and `logging` is not imported.
    log: Any = logger("spanjudge.cli") if args.verbose else _Silent()
    config = load_config(args.config)
    log.info("configuration: %s", args.config or "none (the embedded defaults)")
    engine = Engine(config)
    if "logging" in sys.modules:  # a configured judge logs on its own: give it the CLI's format
        logger("spanjudge")
    if args.expect:
        engine.add_expectations(ExpectationResolver(load_expectations_file(args.expect)))
        log.info("expectations: %s", args.expect)
    log.debug("evaluators: %s", ", ".join(e.name for e in engine.evaluators))
    to_stdout = args.output in (None, "-")
    to_terminal = to_stdout and sys.stdout.isatty()
    colour = args.format == "table" and use_colour(args.color, sys.stdout if to_stdout else None)
    # A terminal line is ~100 columns; a file or a pipe gets explanations whole.
    width = 90 if to_terminal else None
    for path in args.inputs:
        size = _input_bytes([path])
        log.info("reading %s%s", path, "" if size is None else f" ({size:,} bytes)")

    def on_skip(message: str) -> None:
        print(f"spanjudge: skipped: {message}", file=sys.stderr)

    tally = Tally()
    # The result is written only when the whole input was read: a bad line later in a file
    # must not leave half a report behind (exit 2 prints nothing as if it were a result).
    buf = Spool()
    try:
        writer = make_writer(args.format, buf, colour, args.strict, width)  # type: ignore[arg-type]
        summary, stats = run_offline(
            args.inputs,
            engine,
            TallyingWriter(LoggingWriter(writer, log) if args.verbose > 1 else writer, tally),
            skip_invalid=args.skip_invalid,
            progress=sys.stderr.isatty() and not args.quiet,
            on_skip=on_skip,
            total_bytes=_input_bytes(args.inputs),
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
    if summary.sessions == 0:
        # A gate that saw nothing must not look like a gate that passed.
        print(
            f"spanjudge: warning: no spans found in {', '.join(args.inputs)}; nothing was evaluated"
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


class _Silent:
    """The log of a run without -v."""

    def info(self, *args: Any) -> None:
        pass

    debug = info


def cmd_serve(args: argparse.Namespace, rest: Sequence[str], in_process: bool = False) -> int:
    from spanjudge import sidecar

    if _gc_found is not None:  # a server runs for days: the collector as Python sets it
        gc.set_threshold(*_gc_found)
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


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default: this process's) and return its exit status;
    usage errors and --help raise `SystemExit` as argparse does."""
    from spanjudge import logs
    from spanjudge.cli_argv import command_of, plain_eval
    from spanjudge.errors import ConfigError, InputError, OutputError, SpanJudgeError
    from spanjudge.gate import EXIT_INTERNAL, EXIT_USAGE

    # Called with arguments, from a caller's process: its logging is put back on return. The
    # command's own process (argv None) keeps the set-up to the end: atexit hooks log too.
    in_process = argv is not None
    argv = list(sys.argv[1:] if argv is None else argv)
    command = command_of(argv)
    # A plain eval command line is read without argparse; anything else (help, an error) by it.
    args: Any = plain_eval(argv) if command == "eval" else None
    rest: list[str] = []
    if args is None:
        from spanjudge.cli_parser import build_parser

        parser, commands = build_parser(command)
        args, rest = parser.parse_known_args(argv)
        if rest and args.command != "serve":
            # The subcommand's usage, not the top level's: that is where the flag was looked for.
            commands[args.command].error(f"unrecognized arguments: {' '.join(rest)}")
    args.verbose += getattr(args, "sub_verbose", 0)
    restore: list[Callable[[], None]] = []  # undone on return when in_process

    def set_up_logging() -> None:
        import logging

        root = logging.getLogger()
        handlers, level = list(root.handlers), root.level
        logging.basicConfig(level=logging.WARNING, format="spanjudge: %(levelname)s: %(message)s")
        added = [h for h in root.handlers if h not in handlers]

        def undo_root() -> None:  # a caller's process gets its logging back as it was
            root.setLevel(level)
            for handler in added:
                root.removeHandler(handler)

        restore.append(undo_root)
        ours = logging.getLogger("spanjudge")
        before = ours.level
        restore.append(lambda: ours.setLevel(before))
        ours.setLevel({0: logging.WARNING, 1: logging.INFO}.get(args.verbose, logging.DEBUG))

    if args.command != "serve":  # serve sets up its own logging (--log-level)
        # eval without -v may log nothing at all: then it need not import `logging`.
        logs.on_first_use(set_up_logging)
        if args.verbose or args.command != "eval":
            logs.logger("spanjudge")
    try:
        if args.command == "eval":
            return cmd_eval(args)
        if args.command == "serve":
            return cmd_serve(args, rest, in_process)
        if args.command == "calibrate":
            from spanjudge.calibrate import cmd_calibrate

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
            import traceback

            traceback.print_exc(file=sys.stderr)
        print(
            f"spanjudge: internal error: {type(exc).__name__}: {exc} (a bug in spanjudge;"
            " -v prints the traceback; exit 3)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL
    finally:
        logs.cancel(set_up_logging)
        for undo in reversed(restore if in_process else []):
            undo()


def console() -> NoReturn:
    """The `spanjudge` command: the console script and `python -m spanjudge` (`main` is for
    a caller's process: it returns the status and leaves the interpreter alone).

    A release gate runs this once per build, so the process pays only for the command: the
    collector stays out of the way while modules are imported, and once the command is done and
    its output flushed, the atexit handlers run (logging's flush, an exporter's shutdown,
    coverage's save) and the process ends without tearing the interpreter down object by object
    (about a tenth of a small `spanjudge eval`), unless something may still need that
    (`_may_end_now`)."""
    global _gc_found
    _gc_found = gc.get_threshold()
    if _gc_found[0]:  # 0: automatic collection is off, and stays so
        gc.set_threshold(max(_gc_found[0], _START_GC_THRESHOLD), *_gc_found[1:])
    try:
        code: Any = main()
    except SystemExit as exc:  # argparse: usage errors (2), --help and --version (0)
        code = exc.code
    if code is None:
        code = 0
    if isinstance(code, int) and _may_end_now():
        import atexit

        atexit._run_exitfuncs()  # as at a normal exit; they are cleared once run
        if _flushed():
            os._exit(code & 0xFF)
    sys.exit(code)  # a failed flush: the interpreter's own shutdown reports it, as always


def _may_end_now() -> bool:
    """Whether ending with `os._exit` loses nothing a normal exit would do: no other thread
    that Python would wait for (nor an executor's shutdown hook), no interactive prompt to come
    (-i, PYTHONINSPECT), no development mode (its resource warnings come at teardown), and no
    code loaded but the standard library's, spanjudge's and its dependencies' (`_known_code`)."""
    if sys.flags.inspect or os.environ.get("PYTHONINSPECT") or sys.flags.dev_mode:
        return False
    if not _known_code():
        return False
    threading = sys.modules.get("threading")
    if threading is None:
        return True
    if getattr(threading, "_threading_atexits", None):  # concurrent.futures joins its workers
        return False
    if threading.current_thread() is not threading.main_thread():
        return False
    current = threading.current_thread()
    return not any(
        t is not current and not t.daemon and t.is_alive() for t in threading.enumerate()
    )


# The top-level packages of spanjudge's core dependencies and theirs (a test checks them against
# what is installed), and setuptools' `.pth` shim, which every venv with setuptools loads.
_DEPENDENCY_PACKAGES = frozenset(
    (
        "_distutils_hack",
        "_yaml",
        "certifi",
        "charset_normalizer",
        "deprecated",
        "google",
        "grpc",
        "idna",
        "importlib_metadata",
        "opentelemetry",
        "orjson",
        "prometheus_client",
        "re2",
        "requests",
        "typing_extensions",
        "urllib3",
        "wrapt",
        "yaml",
        "zipp",
    )
)


def _known_code() -> bool:
    """Whether every loaded module is the standard library's, spanjudge's or a dependency's, and
    ``__main__`` holds nothing but modules and spanjudge's functions (pip's console script, or
    `python -m spanjudge`). Other code (a plugin, a sitecustomize, a wrapper script) may keep an
    open file or an object with a finaliser in a global, which only the teardown flushes."""
    own = os.path.dirname(__file__) + os.sep
    stdlib = os.path.dirname(os.__file__) + os.sep
    for name, module in list(sys.modules.items()):
        if name == "__main__":
            if not all(
                key.startswith("__")
                or type(value) is type(sys)
                or getattr(value, "__module__", "").startswith("spanjudge.")
                for key, value in vars(module).items()
            ):
                return False
            continue
        path = getattr(module, "__file__", None)
        if not path or path.startswith(own) or name.partition(".")[0] in _DEPENDENCY_PACKAGES:
            continue  # built in, frozen, a namespace package; spanjudge's; a dependency's
        if not path.startswith(stdlib) or path[len(stdlib) :].startswith(
            ("site-packages", "dist-packages")
        ):
            return False
    return True


def _flushed() -> bool:
    """Flush what is buffered for stdout and stderr (all of it, or say no)."""
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None and not stream.closed:
                stream.flush()
        except Exception:  # EPIPE, a closed descriptor, a replaced stream that cannot
            return False
    return True


if __name__ == "__main__":
    console()
