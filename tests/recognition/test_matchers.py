"""Differential: the matchers that stand in for a pattern where it would be compiled on the
first call of a small run (`skill_tools` loader globs, `evidence`'s placeholder check) answer
what the pattern answers, on every tool name and text the fixtures record and on generated
strings."""

from __future__ import annotations

import fnmatch
from functools import cache
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from spanjudge.config import Limits
from spanjudge.recognition import evidence, skill_tools
from spanjudge.recognition.registry import RecogniserRegistry
from spanjudge.spans.files import read_input

FIXTURES = sorted((Path(__file__).parents[2] / "fixtures").glob("*/*.jsonl"))


@cache
def _fixture_strings() -> tuple[str, ...]:
    """Every tool name, skill name, result and text the fixtures' steps hold, and every span
    name and string attribute value."""
    found: set[str] = set()
    registry = RecogniserRegistry.default()
    for path in FIXTURES:
        for chunk in read_input(str(path), Limits()):
            for span in chunk.spans:
                found.add(span.name)
                found.update(v for v in span.attributes.values() if isinstance(v, str))
                for step in registry.recognise_span(span):
                    found.update(
                        s for s in (step.name, step.skill, step.result, step.text) if s is not None
                    )
    return tuple(sorted(found))


GLOBS = [pattern for pattern, _ in skill_tools.SKILL_LOADER_ARGS] + [
    "*",
    "**",
    "*skill*",
    "load_?kill",
    "[sS]kill",
    "*[!a]",
    "a]b",
    "*.md",
    "",
]
PLACEHOLDER_BITS = st.sampled_from(
    [
        "redacted",
        "REDACTED",
        "Redacted",
        "<",
        ">",
        "_",
        "__",
        "*",
        "[",
        "]",
        "null",
        "NULL",
        "none",
        "None",
        "nonE",
        " ",
        "\n",
        "\t",
        "\u00a0",
        "\u2003",
        "\x1c",
        "x",
        "r",
        "n",
        "\u017f",
        "\u212a",
        "é",
        "<REDACTED by policy>",
        "__REDACTED__",
        "[REDACTED]",
    ]
)
PLACEHOLDERS = st.lists(PLACEHOLDER_BITS, max_size=6).map("".join)


def test_loader_globs_match_as_fnmatch_does_on_every_fixture_string() -> None:
    strings = _fixture_strings()
    assert len(strings) > 500
    names = [*strings, "x_load_skill", "_load_skill", "load_skill", "Skill", "skills\n"]
    for name in names:
        for pattern in GLOBS:
            assert skill_tools._glob_matches(name, pattern) == fnmatch.fnmatchcase(name, pattern), (
                name,
                pattern,
            )


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=20) | st.sampled_from(GLOBS).map(lambda g: g.replace("*", "ab")))
def test_loader_globs_match_as_fnmatch_does(name: str) -> None:
    for pattern in GLOBS:
        assert skill_tools._glob_matches(name, pattern) == fnmatch.fnmatchcase(name, pattern)


def test_the_placeholder_check_answers_as_the_pattern_on_every_fixture_string() -> None:
    for text in _fixture_strings():
        assert evidence._redacted(text) == (evidence._REDACTED.match(text) is not None), text


@settings(max_examples=1000, deadline=None)
@given(PLACEHOLDERS | st.text(max_size=12))
def test_the_placeholder_check_answers_as_the_pattern(text: str) -> None:
    assert evidence._redacted(text) == (evidence._REDACTED.match(text) is not None)


def test_placeholders_are_still_told_apart() -> None:
    for text in (
        "__REDACTED__",
        " <redacted> ",
        "[REDACTED]\n",
        "null",
        "None",
        "***",
        "<REDACTED x>",
        "redacted>",
        "REDACTED",
        "<redacted",
        " nUlL \n",
        "\u00a0none\u2003",
    ):
        assert evidence._redacted(text), text
    for text in ("", "  ", "nullify", "none of them", "redacted text", "pdf-report", "\u017f"):
        assert not evidence._redacted(text), text
