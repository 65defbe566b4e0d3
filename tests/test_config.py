"""Configuration and expectations files: every mistake reported at once, with path and fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from spanjudge.config import load_config, parse_config
from spanjudge.errors import ConfigError
from spanjudge.expectations import load_expectations_file


def problems_of(tmp_path: Path, text: str, loader=load_config) -> list[str]:  # type: ignore[no-untyped-def]
    path = tmp_path / "file.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        loader(str(path))
    assert info.value.source == str(path)
    return info.value.problems


def test_expectation_typos_and_types_are_all_reported(tmp_path: Path) -> None:
    problems = problems_of(
        tmp_path,
        "sessions:\n"
        "  'adk-*':\n"
        "    skill: [csv-report]\n"
        "    sucess: {contains: total}\n"
        "    reference_answer: 5\n"
        "  b:\n"
        "    success: {regex: '(unclosed'}\n",
        load_expectations_file,
    )
    assert problems == [
        "sessions.adk-*.skill: unknown key (did you mean 'skills'?) "
        "(allowed: skills, task, reference_answer, success, trajectory, assertions)",
        "sessions.adk-*.sucess: unknown key (did you mean 'success'?) "
        "(allowed: skills, task, reference_answer, success, trajectory, assertions)",
        "sessions.adk-*.reference_answer: expected text, got 5",
        "sessions.b.success.regex: invalid regular expression '(unclosed': "
        "missing ), unterminated subpattern at position 0",
    ]


def test_an_expectations_file_passed_as_config_says_so(tmp_path: Path) -> None:
    problems = problems_of(tmp_path, "sessions:\n  s-1:\n    skills: [csv-report]\n")
    assert problems == [
        "sessions: this looks like an expectations file (session id -> skills); "
        "pass it with --expect, or list it under expectations_files"
    ]


def test_yaml_syntax_error_names_line_and_column(tmp_path: Path) -> None:
    [problem] = problems_of(tmp_path, "sessions:\n  idle_timeout_s: [1\n")
    assert problem.startswith("not valid YAML: line 3, column 1:")


def test_settings_are_checked_with_suggestions() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(
            {
                "sesions": {},
                "sessions": {"max_age": 5},
                "evaluators": {
                    "instruction_following": {"enabled": "false"},
                    "trajectory_validty": {},
                },
                "limits": {"max_attr_chars": 10},
            }
        )
    problems = info.value.problems
    assert any(
        p.startswith("sesions: unknown section (did you mean 'sessions'?)") for p in problems
    )
    assert any(
        p.startswith("sessions.max_age: unknown setting (did you mean 'max_age_s'?)")
        for p in problems
    )
    assert (
        "evaluators.instruction_following.enabled: expected true or false, got 'false'" in problems
    )
    assert any(
        p.startswith(
            "evaluators.trajectory_validty: unknown evaluator (did you mean 'trajectory_validity'?)"
        )
        for p in problems
    )
    assert "limits.max_attr_chars: at least 1024, got 10" in problems


@pytest.mark.parametrize("endpoint", ["ftp://x", "collector"])
def test_export_endpoint_must_be_a_url_or_host_port(endpoint: str) -> None:
    import spanjudge.sidecar.config  # noqa: F401  (the sidecar registers its `serve` section)

    with pytest.raises(ConfigError) as info:
        parse_config({"serve": {"export": {"endpoint": endpoint}}})
    assert info.value.problems == [
        f"serve.export.endpoint: expected http(s)://host:port or host:port, got {endpoint!r}"
    ]


def test_a_missing_expectations_file_is_named_where_it_was_looked_for(tmp_path, capsys):  # type: ignore[no-untyped-def]
    # examples/spanjudge.yaml copied without its expectations.yaml: the path is relative to the
    # config file, so the message must say which file was looked for.
    from spanjudge.cli import main

    config = tmp_path / "conf" / "spanjudge.yaml"
    config.parent.mkdir()
    config.write_text("expectations_files: [expectations.yaml]\n")
    traces = tmp_path / "t.jsonl"
    traces.write_text("")
    assert main(["eval", str(traces), "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert str(tmp_path / "conf" / "expectations.yaml") in err, err
    assert "No such file or directory" in err
