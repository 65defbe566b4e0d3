"""Harness skill-loading tools, shared by every preset (ARCHITECTURE.md section 2, last rows).

A tool call is a skill load when its tool is one of the known loaders; the skill's name comes
from the loader's argument. File-read tools load a skill when they read a path ending `SKILL.md`.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

# tool name (glob) -> argument names that carry the skill name, tried in order
SKILL_LOADER_ARGS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("skills", ("skill_name", "name", "skill")),  # Strands AgentSkills plugin
    ("Skill", ("skill", "name", "command")),  # Claude Code / Claude Agent SDK
    ("load_skill", ("skill_name", "name", "skill")),  # Google ADK, OpenAI Agents
    ("*_load_skill", ("skill_name", "name", "skill")),
    ("activate_skill", ("name", "skill_name", "skill")),  # Gemini CLI
    ("invoke_skill", ("name", "skill_name", "skill")),  # OpenHands
)
FILE_READ_TOOLS = ("read_file", "read", "Read", "view", "cat", "open_file", "file_read", "fs_read")
FILE_PATH_ARGS = ("file_path", "path", "filename", "file", "target_file")
_SKILL_PATH = re.compile(r"(?:^|/)([^/]+)/SKILL\.md$", re.IGNORECASE)


def skill_from_path(path: str) -> str | None:
    """`/skills/pdf-report/SKILL.md` -> `pdf-report`."""
    match = _SKILL_PATH.search(path.strip())
    return match.group(1) if match else None


def skill_loader(tool_name: str, arguments: Any) -> str | None:
    """The skill a tool call loads, or None when the call is not a skill load.

    Returns the empty string for a loader called without a usable skill name (still a load
    attempt, which will be reported as failed).
    """
    args = arguments if isinstance(arguments, Mapping) else {}
    loader = _loader(tool_name)
    if loader is not None:
        pattern, keys = loader
        for key in keys:
            value = args.get(key)
            if isinstance(value, str) and value.strip():
                return value.strip()
        if isinstance(arguments, str) and arguments.strip() and pattern != "Skill":
            return arguments.strip()
        return ""
    if tool_name in FILE_READ_TOOLS or tool_name.endswith("read_file"):
        for key in FILE_PATH_ARGS:
            value = args.get(key)
            if isinstance(value, str):
                return skill_from_path(value)
    return None


@lru_cache(maxsize=4096)
def _loader(tool_name: str) -> tuple[str, tuple[str, ...]] | None:
    """The loader entry a tool name matches (tool names repeat: matched once each)."""
    for pattern, keys in SKILL_LOADER_ARGS:
        if tool_name == pattern or fnmatch.fnmatchcase(tool_name, pattern):
            return pattern, keys
    return None
