"""A plain eval command line is read without argparse (`spanjudge.cli_argv.plain_eval`): whatever
it accepts, it reads exactly as argparse does, and it leaves everything else to argparse."""

from __future__ import annotations

import argparse

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spanjudge import cli_argv
from spanjudge.cli_parser import build_parser

# Words an eval command line is made of: every option in each spelling (exact, abbreviated,
# attached, combined), values, inputs, and what argparse answers with help or an error.
WORDS = (
    *cli_argv.EVAL_OPTIONS,
    *cli_argv.FORMATS,
    "-v", "-vv", "-vvv", "--verbose", "-vq", "-qv", "--verbose=1",
    "--config=c.yaml", "--config=", "--output=", "--output=r.txt", "--output=-x", "-o=r.txt",
    "-or.txt", "-qo", "--format=json", "--format=xml", "--format=", "--strict=1", "--no-color=1",
    "--out", "--conf", "--col", "--ver", "--version", "--fail", "--s",
    "-h", "--help", "--", "-", "", "-x", "-1", "- x", "-o -", "x y",
    "traces.jsonl", "b.pb", "c.jsonl.gz", "r.txt", "xml", "eval", "serve", "demo",
)  # fmt: skip
LEADING = ("-v", "-vv", "--verbose")


def _argparse(argv: list[str]) -> dict[str, object] | None:
    """What argparse makes of ``argv`` as `spanjudge.cli.main` does; None: help or an error."""
    parser, _ = build_parser("eval")
    try:
        args, rest = parser.parse_known_args(argv)
    except SystemExit:
        return None
    return None if rest else vars(args)


@pytest.fixture(autouse=True)
def _quiet_argparse(monkeypatch: pytest.MonkeyPatch) -> None:
    # argparse prints its help and errors: not what is compared here
    monkeypatch.setattr(argparse.ArgumentParser, "_print_message", lambda *a, **k: None)


@settings(max_examples=3000, deadline=None)
@given(
    st.lists(st.sampled_from(LEADING), max_size=2),
    st.lists(st.sampled_from(WORDS), max_size=7),
)
def test_what_it_reads_it_reads_as_argparse(leading: list[str], words: list[str]) -> None:
    argv = [*leading, "eval", *words]
    fast = cli_argv.plain_eval(argv)
    if fast is not None:
        assert vars(fast) == _argparse(argv), argv


COMMON = (
    ["eval", "traces.jsonl"],
    ["eval", "traces.jsonl", "-q", "-o", "report.txt"],
    ["-v", "eval", "a.jsonl", "b.jsonl", "--format", "json", "--output", "r.json", "--strict"],
    ["eval", "--expect", "e.yaml", "--config=c.yaml", "-", "--no-color", "-vv", "--skip-invalid"],
    ["eval", "--format=junit", "--output=junit.xml", "--fail-on-error", "t.pb", "--color"],
)


@pytest.mark.parametrize("argv", COMMON)
def test_the_usual_command_lines_skip_argparse_and_read_the_same(argv: list[str]) -> None:
    fast = cli_argv.plain_eval(argv)
    assert fast is not None and vars(fast) == _argparse(argv)


@pytest.mark.parametrize(
    "argv",
    [
        ["eval"],  # no input: argparse's error
        ["eval", "a.jsonl", "-q", "b.jsonl"],  # inputs after an option: unrecognized
        ["eval", "a.jsonl", "--format", "xml"],  # not a choice
        ["eval", "a.jsonl", "-o"],  # no value
        ["eval", "a.jsonl", "-o", "-q"],  # an option for a value
        ["eval", "a.jsonl", "--out", "r.txt"],  # an abbreviation: argparse resolves it
        ["eval", "a.jsonl", "--help"],
        ["eval", "--", "a.jsonl"],
        ["--verbose", "-x", "eval", "a.jsonl"],
    ],
)
def test_anything_else_is_left_to_argparse(argv: list[str]) -> None:
    assert cli_argv.plain_eval(argv) is None


def test_its_options_are_evals_options_with_their_defaults() -> None:
    """The table `plain_eval` reads from names every option `spanjudge eval` has (but -h and -v),
    with argparse's dest, default and stored value."""
    _, commands = build_parser("eval")
    actions = [a for a in commands["eval"]._actions if a.dest not in ("help", "sub_verbose")]
    table = {
        option: (a.dest, a.const if a.nargs == 0 else None)
        for a in actions
        for option in a.option_strings
    }
    # BooleanOptionalAction stores True for --color and False for --no-color
    table["--color"], table["--no-color"] = ("color", True), ("color", False)
    assert table == cli_argv.EVAL_OPTIONS
    defaults = {a.dest: a.default for a in commands["eval"]._actions if a.dest != "help"}
    assert defaults == cli_argv.EVAL_DEFAULTS
    assert next(a for a in actions if a.dest == "format").choices == cli_argv.FORMATS
