"""A SKILL.md document's text: its front matter's name, and the wrapping harnesses add around
a file they print (used by `evidence`).

Every tool result is read through these, so each pattern runs only where it can match: the
literal text it starts with or must contain is looked for first (a plain substring search),
which gives the same answers as running the pattern on everything.
"""

from __future__ import annotations

import re

from spanjudge.remembered import remembered_within

# A SKILL.md document: YAML front matter that names the skill.
_FRONT_MATTER = re.compile(r"(?:\A|\n)---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.S)
_FM_DESCRIPTION = re.compile(r"^description:", re.M)
_FM_NAME = re.compile(r"^name:\s*['\"]?([^'\"\n]+?)['\"]?\s*$", re.M)
_FM_FIRST = 400  # the front matter starts within the first 400 characters
_FM_WITHIN = 4000  # and ends within the first 4000

# What harnesses wrap around a file's text: Deep Agents' window header, Strands' metadata tail,
# Codex-style exec output headers.
_READ_WINDOW = re.compile(r"\A@@ lines \d+-\d+ of \d+ @@\r?\n")
_STRANDS_TAIL = re.compile(
    r"\n+---\n(?:Allowed tools|Compatibility|Location): .*\Z|\n+Available resources:\n.*\Z", re.S
)
_EXEC_LINES = (
    "Chunk ID",
    "Wall time",
    "Process exited",
    "Exit code",
    "Original token count",
    "Total output lines",
)
_EXEC_HEADER = re.compile(r"\A(?:(?:" + "|".join(_EXEC_LINES) + r")[^\n]*\n){1,8}Output:\r?\n")


@remembered_within()  # a skill's text comes back the same in every session that loads it
def unwrap(text: str) -> str:
    """``text`` without a read window header, an exec output header or Strands' metadata tail."""
    if text.startswith("@@ lines "):
        text = _READ_WINDOW.sub("", text, count=1)
    if text.startswith(_EXEC_LINES):
        text = _EXEC_HEADER.sub("", text, count=1)
    if "\n---\n" in text or "\nAvailable resources:\n" in text:
        text = _STRANDS_TAIL.sub("", text)
    return text


def front_matter_name(text: str | None) -> str | None:
    """The `name:` of a SKILL.md document's YAML front matter found at the start of ``text``.

    The Agent Skills format requires `name` and `description`: front matter without a
    description (a blog post, a Jekyll page) is not a skill's."""
    if not text or "---" not in text[:_FM_FIRST]:
        return None
    match = _front_matter(text[:_FM_WITHIN])
    if match is None or not _FM_DESCRIPTION.search(match.group(1)):
        return None
    name = _FM_NAME.search(match.group(1))
    return name.group(1).strip() if name else None


def _front_matter(head: str) -> re.Match[str] | None:
    """The first `_FRONT_MATTER` match in ``head`` when it starts within `_FM_FIRST`
    characters, else None: the pattern is tried only where a match can start (the start of
    the text, a newline before `---`), in order, as a search would find it."""
    if head.startswith("---") and (found := _FRONT_MATTER.match(head)) is not None:
        return found
    at = head.find("\n---", 0, _FM_FIRST + 4)
    while at != -1:
        if (found := _FRONT_MATTER.match(head, at)) is not None:
            return found
        at = head.find("\n---", at + 1, _FM_FIRST + 4)
    return None
