"""Differential: the default effect table, matched without compiling its patterns, classifies
every tool name as `re.search` of DEFAULT_EFFECT_PATTERNS does (the fixtures' tool names and
span names, and generated names built from the table's words)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from hypothesis import given, settings
from hypothesis import strategies as st

from spanjudge.config import Limits
from spanjudge.recognition.registry import RecogniserRegistry
from spanjudge.spans.files import read_input
from spanjudge.trajectory import effects
from spanjudge.trajectory.effects import DEFAULT_EFFECT_MAP, DEFAULT_EFFECT_PATTERNS

if TYPE_CHECKING:
    from spanjudge.trajectory.effects import Effect

FIXTURES = sorted((Path(__file__).parents[2] / "fixtures").glob("*/*.jsonl"))
WORDS = sorted(
    {w for pattern, _ in DEFAULT_EFFECT_PATTERNS for w in re.findall(r"[A-Za-z_]+", pattern)}
)


def _by_pattern(tool_name: str) -> Effect | None:
    """What `_classify` answered before: the first pattern that `re.search`es either case."""
    for pattern, effect in DEFAULT_EFFECT_PATTERNS:
        compiled = re.compile(pattern)
        if compiled.search(tool_name.lower()) or compiled.search(tool_name):
            return effect
    return None


def _fixture_tool_names() -> set[str]:
    registry = RecogniserRegistry.default()
    names: set[str] = set()
    for path in FIXTURES:
        for chunk in read_input(str(path), Limits()):
            for span in chunk.spans:
                names.add(span.name)
                names.update(s.name for s in registry.recognise_span(span) if s.name)
    return names


def _by_pattern_or_base(tool_name: str) -> Effect | None:
    """The whole name's effect, else that of the text after a namespace separator (`__`, `-`,
    `.`, `/`, `:`), leftmost separator first."""
    bases = [tool_name[m.end() :] for m in re.finditer(r"__|[-./:]", tool_name)]
    for name in (tool_name, *bases):
        if name and _by_pattern(name) is not None:
            return _by_pattern(name)
    return None


def test_every_fixture_tool_name_gets_the_effect_its_pattern_gives() -> None:
    names = _fixture_tool_names()
    assert len(names) > 100
    assert {DEFAULT_EFFECT_MAP.effect(n) for n in names} >= {"read", "create", "delete"}
    for name in names:
        assert DEFAULT_EFFECT_MAP.effect(name) == _by_pattern_or_base(name), name


NAME_BITS = st.sampled_from([*WORDS, "_", "__", "-", ".", " ", "\n", "x", "X", "İ", "ß"])


@settings(max_examples=1500, deadline=None)
@given(st.lists(NAME_BITS, max_size=5).map("".join) | st.text(max_size=10))
def test_every_name_gets_the_effect_its_pattern_gives(name: str) -> None:
    for variant in (name, name.upper(), name.title()):
        assert effects._classify(DEFAULT_EFFECT_PATTERNS, variant) == _by_pattern(variant), variant


def test_edge_names() -> None:
    for name, effect in [
        ("delete_file", "delete"),
        ("x_open_ticket", "create"),
        ("open_tickets", None),
        ("Write", "create"),
        ("write\n", "create"),
        ("Edit\n", "modify"),
        ("edit\n\n", None),
        ("create_", "create"),
        ("creates", None),
        ("LS", "read"),
        ("fetch_url_x", "external"),
    ]:
        assert _by_pattern(name) == effect, name  # the reference itself
        assert DEFAULT_EFFECT_MAP.effect(name) == effect, name
    # no pattern matches the whole name; its base name after the namespace separator is a delete
    assert _by_pattern("file-delete") is None
    assert DEFAULT_EFFECT_MAP.effect("file-delete") == "delete"


def test_a_configured_pattern_table_is_still_searched_as_patterns() -> None:
    table = ((r"^zap", "delete"),)
    assert effects._classify(table, "zap_all") == "delete"
    assert effects._classify(table, "delete_all") is None
