"""The plain `spanjudge eval` command line, read without argparse (ARCHITECTURE.md section 9).

A release gate runs ``spanjudge eval traces.jsonl -q -o report.txt`` once per build, and a small
eval spends a tenth of its time importing argparse (with gettext and locale) and building its
parser. `plain_eval` reads the usual forms of an eval command line itself: exact option names
(``--output F``, ``--output=F``), one run of inputs, nothing argparse would answer with help or
an error. It gives the namespace argparse gives for the same argv, and None for anything else
(an abbreviation, ``-h``, ``-qo F``, ``--``, an unknown or misplaced word...), which
`spanjudge.cli.main` then hands to argparse (`spanjudge.cli_parser`): help, usage and error
texts are argparse's own. `tests/test_cli_argv.py` checks the two against each other over
generated command lines.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

COMMANDS = ("eval", "serve", "demo", "calibrate")
FORMATS = ("table", "json", "junit", "html")

# eval's options (cli_parser._add_eval) but -h and the -v count: option string -> (dest,
# value), a value of None for an option taking an argument, else the one the flag stores.
_TAKES_ARGUMENT = None
EVAL_OPTIONS: dict[str, tuple[str, object]] = {
    "--config": ("config", _TAKES_ARGUMENT),
    "--expect": ("expect", _TAKES_ARGUMENT),
    "--format": ("format", _TAKES_ARGUMENT),
    "--output": ("output", _TAKES_ARGUMENT),
    "-o": ("output", _TAKES_ARGUMENT),
    "--strict": ("strict", True),
    "--fail-on-error": ("fail_on_error", True),
    "--skip-invalid": ("skip_invalid", True),
    "--quiet": ("quiet", True),
    "-q": ("quiet", True),
    "--color": ("color", True),
    "--no-color": ("color", False),
}
# What argparse's namespace holds for an option not given (the parser's defaults).
EVAL_DEFAULTS: dict[str, object] = {
    "inputs": None,
    "config": None,
    "expect": None,
    "format": "table",
    "output": None,
    "strict": False,
    "fail_on_error": False,
    "skip_invalid": False,
    "quiet": False,
    "color": None,
    "sub_verbose": 0,
}


def verbose_count(arg: str) -> int:
    """How many -v ``arg`` is (``--verbose``, ``-v``, ``-vv``...), 0 when it is something else."""
    if arg == "--verbose":
        return 1
    if len(arg) >= 2 and arg == "-" + "v" * (len(arg) - 1):
        return len(arg) - 1
    return 0


def command_of(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` runs when nothing before it could print the top-level help or an
    error that names the other subcommands (only -v flags come first), else None."""
    for arg in argv:
        if arg in COMMANDS:
            return arg
        if not verbose_count(arg):
            return None
    return None


def _positional(arg: str) -> bool:
    """A word argparse takes as a value, never as an option: no leading dash, or ``-`` (stdin)."""
    return not arg.startswith("-") or arg == "-"


def plain_eval(argv: Sequence[str]) -> SimpleNamespace | None:
    """argparse's namespace for ``argv``, an eval command line in a plain form, else None."""
    values: dict[str, object] = {"verbose": 0, "command": "eval", **EVAL_DEFAULTS}
    verbose = sub_verbose = 0
    words = iter(argv)
    for arg in words:  # -v flags, then the subcommand
        if arg == "eval":
            break
        count = verbose_count(arg)
        if not count:
            return None
        verbose += count
    inputs: list[str] = []
    ended = False  # inputs were followed by an option: argparse takes no more of them
    for arg in words:
        if _positional(arg):
            if ended:
                return None
            inputs.append(arg)
            continue
        ended = bool(inputs)
        count = verbose_count(arg)
        if count:
            sub_verbose += count
            continue
        name, equals, attached = arg.partition("=")
        known = EVAL_OPTIONS.get(name)
        if known is None or (equals and not name.startswith("--")):
            return None
        dest, value = known
        if value is _TAKES_ARGUMENT:
            if not equals:
                attached = next(words, "")
                if not attached or not _positional(attached):
                    return None  # a missing value, or one argparse would take for an option
            if dest == "format" and attached not in FORMATS:
                return None
            value = attached
        elif equals:
            return None
        values[dest] = value
    if not inputs:
        return None
    values.update(verbose=verbose, inputs=inputs, sub_verbose=sub_verbose)
    return SimpleNamespace(**values)
