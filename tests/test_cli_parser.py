"""What `spanjudge` shows for help and usage errors, whatever comes before the subcommand: the
top level names every subcommand; a subcommand's help and errors are its own."""

from __future__ import annotations

import pytest

from spanjudge.cli import main

COMMANDS = ("eval", "serve", "demo", "calibrate")


def _exit(capsys, *argv: str) -> tuple[int, str, str]:  # type: ignore[no-untyped-def]
    with pytest.raises(SystemExit) as exc:
        main(list(argv))
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out, err


@pytest.mark.parametrize("argv", [["--help"], ["-h", "eval"], ["-v", "--help", "eval"]])
def test_top_level_help_lists_every_subcommand(capsys, argv):  # type: ignore[no-untyped-def]
    code, out, _ = _exit(capsys, *argv)
    assert code == 0 and out.startswith("usage: spanjudge [-h]")
    for name in COMMANDS:
        assert f"    {name} " in out
    assert "run the OTLP sidecar" in out and "--skip-invalid" not in out


@pytest.mark.parametrize("argv", [["bogus"], ["-v", "bogus"], ["-vv", "bogus", "eval"]])
def test_no_or_unknown_subcommand_names_them_all(capsys, argv):  # type: ignore[no-untyped-def]
    code, out, err = _exit(capsys, *argv)
    assert code == 2 and out == "" and err.startswith("usage: spanjudge [-h]")
    assert all(name in err for name in COMMANDS)


def test_no_subcommand_is_the_top_levels_usage_error(capsys):  # type: ignore[no-untyped-def]
    code, _, err = _exit(capsys, "-v")
    assert code == 2 and err.startswith("usage: spanjudge [-h] [-v] [--version] COMMAND")
    assert "required: COMMAND" in err


@pytest.mark.parametrize("argv", [["eval", "--help"], ["-v", "eval", "--help"]])
def test_eval_help_after_verbose_flags_is_evals(capsys, argv):  # type: ignore[no-untyped-def]
    code, out, _ = _exit(capsys, *argv)
    assert code == 0 and out.startswith("usage: spanjudge eval [-h]")
    assert "--skip-invalid" in out and "exit status" in out


def test_unknown_flag_after_verbose_and_eval_shows_evals_usage(capsys):  # type: ignore[no-untyped-def]
    code, _, err = _exit(capsys, "-vv", "eval", "x.jsonl", "--bogus")
    assert code == 2 and err.startswith("usage: spanjudge eval [-h]")
    assert "unrecognized arguments: --bogus" in err


def test_eval_help_names_everything_an_expectations_file_may_require(capsys):  # type: ignore[no-untyped-def]
    _, out, _ = _exit(capsys, "eval", "--help")
    expect = " ".join(out.split("--expect FILE")[-1].split())  # the option's help, unwrapped
    for key in ('"skills"', '"trajectory"', '"assertions"'):
        assert key in expect.split("--format")[0], key
