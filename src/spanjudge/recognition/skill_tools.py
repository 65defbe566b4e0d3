"""Skill loaders known by name: one kind of evidence among several (see `evidence`).

A call to one of these tools is a skill load even when its argument names a skill nobody
offered (a wrong or made-up skill is a failed load, not a tool call). Loaders nobody listed
are recognised from their arguments and results instead.
"""

from __future__ import annotations

import fnmatch
import re

from spanjudge.remembered import remembered_when_short
from spanjudge.trajectory.toolnames import candidates

# tool name (glob) -> argument names that carry the skill name, tried in order
SKILL_LOADER_ARGS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("skills", ("skill_name", "name", "skill")),  # Strands AgentSkills plugin
    ("Skill", ("skill", "name", "command")),  # Claude Code / Claude Agent SDK
    ("load_skill", ("skill_name", "name", "skill")),  # Google ADK, OpenAI Agents, MAF, Haystack
    ("*_load_skill", ("skill_name", "name", "skill")),
    ("activate_skill", ("name", "skill_name", "skill")),  # Gemini CLI
    ("invoke_skill", ("name", "skill_name", "skill")),  # OpenHands
)
_SKILL_PATH = re.compile(r"(?:^|[\\/])([^\\/]+)[\\/]SKILL\.md$", re.IGNORECASE)


def skill_from_path(path: str) -> str | None:
    """`/skills/pdf-report/SKILL.md` -> `pdf-report`."""
    match = _SKILL_PATH.search(path.strip())
    return match.group(1) if match else None


@remembered_when_short(maxsize=4096)
def known_loader(tool_name: str) -> tuple[str, ...] | None:
    """The skill-name arguments of a known loader, or None (tool names repeat: matched once).
    A namespaced loader (`mcp__skills__load_skill`) is known by its base name."""
    for name in candidates(tool_name):
        for pattern, keys in SKILL_LOADER_ARGS:
            if _glob_matches(name, pattern):
                return keys
    return None


def _glob_matches(name: str, pattern: str) -> bool:
    """`fnmatch.fnmatchcase`, without compiling a pattern for the usual globs: one with no
    wildcard is the name itself, `*` and a wildcard-free rest is a suffix."""
    rest = pattern[1:] if pattern.startswith("*") else None
    if not _WILDCARDS.intersection(pattern):
        return name == pattern
    if rest is not None and not _WILDCARDS.intersection(rest):
        return name.endswith(rest)
    return fnmatch.fnmatchcase(name, pattern)


_WILDCARDS = frozenset("*?[")
