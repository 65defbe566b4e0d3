"""Patterns from the configuration run in linear time, and YAML aliases are bounded."""

from __future__ import annotations

from pathlib import Path

import pytest

from spanjudge.conditions import check_rules
from spanjudge.config import load_config, parse_config
from spanjudge.errors import ConfigError


@pytest.mark.timeout(20)
def test_a_success_regex_cannot_backtrack_for_ever() -> None:
    held, lines = check_rules({"regex": "^(a+)+$"}, "a" * 34 + "!")
    assert not held
    assert lines == ["matches /^(a+)+$/: no"]
    assert check_rules({"regex": "^(a+)+$"}, "AAAA")[0]  # ignore_case, as before


def test_an_invalid_pattern_keeps_its_position_in_the_message() -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config({"expectations": [{"when": {"request_matches": "(x"}, "skills": ["s"]}]})
    assert "expectations[0].when.request_matches: invalid regex '(x'" in str(raised.value)
    assert "position" in str(raised.value)


def test_anchors_and_merge_keys_within_the_bound_still_load(tmp_path: Path) -> None:
    path = tmp_path / "spanjudge.yaml"
    path.write_text(
        "expectations:\n"
        "  - {when: {request_matches: report}, skills: &skills [pdf, docx]}\n"
        "  - {when: {request_matches: letter}, skills: *skills}\n"
    )
    config = load_config(str(path))
    assert [rule.skills for rule in config.rules] == [("pdf", "docx"), ("pdf", "docx")]


def test_an_alias_inside_its_own_anchor_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "spanjudge.yaml"
    path.write_text("expectations: &loop [*loop]\n")
    with pytest.raises(ConfigError) as raised:
        load_config(str(path))
    assert str(path) in str(raised.value)
    assert "aliases expand to more than" in str(raised.value)
