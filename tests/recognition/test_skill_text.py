"""The cheap pre-checks in front of the evidence patterns never change an answer.

`skill_text` and `base.may_match` look for the literal text a pattern needs before running
it. Checked against the patterns run on everything (the way evidence read results before),
on generated texts made of the pieces those patterns look for, non-ASCII case variants too.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from spanjudge.recognition import base, evidence, skill_text

PIECES = [
    "---",
    "--- ",
    "\n",
    "\r\n",
    "name: csv-report",
    "name: 'x y'",
    "description: d",
    "# CSV report",
    "Allowed tools: read_csv",
    "Location: /skills/x",
    "Available resources:",
    "@@ lines 1-20 of 40 @@",
    "Exit code: 0",
    "Wall time: 1s",
    "Output:",
    "NOT FOUND",
    "not  found",
    "Unknown Skill",
    "\u017fkill",  # long s: matches "s" case-insensitively
    "is requ\u0131red",  # dotless i
    "status",
    '"status": "error"',
    "isError: true",
    "invalid arguments",
    "x" * 120,
    "é",
]
TEXTS = st.lists(st.sampled_from(PIECES), max_size=14).map("".join)


def old_front_matter_name(text: str | None) -> str | None:
    if not text or "---" not in text[:400]:
        return None
    match = re.compile(skill_text._FRONT_MATTER.pattern, re.S).search(text[:4000])
    if match is None or match.start() > 400:
        return None
    if not re.search(r"^description:", match.group(1), re.M):
        return None
    name = re.search(r"^name:\s*['\"]?([^'\"\n]+?)['\"]?\s*$", match.group(1), re.M)
    return name.group(1).strip() if name else None


def old_unwrap(text: str) -> str:
    text = re.sub(skill_text._READ_WINDOW.pattern, "", text, count=1)
    text = re.sub(skill_text._EXEC_HEADER.pattern, "", text, count=1)
    return re.sub(skill_text._STRANDS_TAIL.pattern, "", text, flags=re.S)


@settings(max_examples=800, deadline=None)
@given(TEXTS)
def test_front_matter_and_unwrapping_answer_as_the_patterns_do(text: str) -> None:
    assert skill_text.front_matter_name(text) == old_front_matter_name(text)
    assert skill_text.unwrap(text) == old_unwrap(text)


@settings(max_examples=800, deadline=None)
@given(TEXTS)
def test_word_prechecks_answer_as_the_patterns_do(text: str) -> None:
    refusal = re.compile(base._REFUSALS.pattern, re.I).search(text) is not None
    assert base.is_refusal(text) == (bool(text) and refusal)
    for pattern, words in (
        (evidence._PAYLOAD_ERROR, evidence._PAYLOAD_WORDS),
        (evidence._VALIDATION_HINT, evidence._HINT_WORDS),
    ):
        if re.compile(pattern.pattern, re.I).search(text) is not None:
            assert base.may_match(text, words), (pattern, text)


def test_front_matter_after_other_text_and_a_late_one() -> None:
    doc = "---\nname: a\ndescription: b\n---\nbody"
    assert skill_text.front_matter_name("intro\n" + doc) == "a"
    assert skill_text.front_matter_name("x" * 390 + "\n" + doc) == "a"  # starts at 390
    assert skill_text.front_matter_name("x" * 401 + "\n" + doc) is None  # starts past 400
    # the first block is the front matter, even one without a description
    assert skill_text.front_matter_name("---\nno description\n" + doc) is None
    for text in ("---\nno description\n" + doc, "\n" + doc, "x\n---\n" + doc):
        assert skill_text.front_matter_name(text) == old_front_matter_name(text)
