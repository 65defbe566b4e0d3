"""Skills from configured directories, read per the Agent Skills format.

`skills: {paths: [./skills, ~/.agents/skills]}` in the configuration: each path is a folder of
skill folders (`<path>/<name>/SKILL.md`) or one skill folder itself. A SKILL.md is YAML front
matter (`name`, `description`, ...) between `---` lines, then the body. The library supplies a
catalogue when the trace recorded none, recognises a known skill's body in a tool result, and
supplies the body of a load whose trace did not record it (so `instruction_following` can be
judged; the report says the body came from the directory).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from spanjudge.spans.text import valid_yaml_strings
from spanjudge.trajectory.skills import EMPTY_LIBRARY, Skill, SkillLibrary

_FRONT_MATTER = re.compile(r"\A\ufeff?---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)(.*)\Z", re.S)


def parse_skill_md(text: str, path: str) -> tuple[Skill | None, str | None]:
    """(skill, problem): a SKILL.md needs front matter with a `name`."""
    match = _FRONT_MATTER.match(text)
    if match is None:
        return None, "no YAML front matter (expected '---' lines around name and description)"
    try:
        meta = yaml.safe_load(match.group(1))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 2}" if mark is not None else ""
        return None, f"front matter is not valid YAML{where}"
    meta = valid_yaml_strings(meta, match.group(1))
    if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str):
        return None, "front matter has no `name`"
    description = meta.get("description")
    return (
        Skill(
            name=str(meta["name"]).strip(),
            description=str(description).strip() if description is not None else None,
            body=match.group(2).strip(),
            path=path,
        ),
        None,
    )


def parse_skills(
    raw: Any, path: str, problems: list[str], base: Path | None = None
) -> SkillLibrary:
    """The `skills` configuration section; every problem is appended to ``problems``."""
    if raw is None:
        return EMPTY_LIBRARY
    if not isinstance(raw, Mapping):
        problems.append(f"{path}: expected a mapping like {{paths: [./skills]}}")
        return EMPTY_LIBRARY
    for key in raw:
        if key != "paths":
            problems.append(f"{path}.{key}: unknown setting (allowed: paths)")
    paths = raw.get("paths")
    if not isinstance(paths, list) or not all(isinstance(p, str) and p for p in paths):
        problems.append(f"{path}.paths: expected a list of directories holding skill folders")
        return EMPTY_LIBRARY
    skills: dict[str, Skill] = {}
    for i, entry in enumerate(paths):
        where = f"{path}.paths[{i}]"
        folder = Path(entry).expanduser()
        if base is not None and not folder.is_absolute():
            folder = base / folder
        if not folder.is_dir():
            problems.append(f"{where}: {str(folder)!r} is not a directory")
            continue
        files = [folder / "SKILL.md"] if (folder / "SKILL.md").is_file() else []
        files += sorted(folder.glob("*/SKILL.md"))
        if not files:
            problems.append(f"{where}: no SKILL.md in {str(folder)!r} or its sub-folders")
        for file in files:
            try:
                text = file.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                problems.append(f"{where}: cannot read {file}: {exc}")
                continue
            skill, problem = parse_skill_md(text, str(file))
            if skill is None:
                problems.append(f"{where}: {file}: {problem}")
            else:
                skills.setdefault(skill.name, skill)
    return SkillLibrary(skills=skills, paths=tuple(paths))
