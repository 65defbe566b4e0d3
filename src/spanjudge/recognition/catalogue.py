"""Skill catalogues in every recorded form, shared by all presets.

Harnesses tell the model which skills exist in one of a few shapes, in a system prompt or in
a loader tool's description:
- `<available_skills><skill><name>..</name><description>..</description></skill>...` (Strands,
  Claude-style XML), or "- name: description" lines inside that block;
- Deep Agents: "- **name**: description" lines under "**Available Skills:**";
- markdown lists under any heading that says "available skills" (OpenAI Agents / Codex:
  "### Available skills" then "- name: description (file: .../SKILL.md)", or the location in
  brackets after the name: "- name (/skills/name) - description"), or a line ending
  "available skills:" in a tool description (Haystack's `load_skill`);
- a list after a line saying its items "can be loaded" (pydantic-ai-harness: "The following
  capabilities are deferred and can be loaded using the `load_capability` tool").

Beyond those, a catalogue is recognised by evidence, whatever its layout: a run of two or more
entries, each pairing a skill-like name (one word: letters, digits, `-_.:`) with a one-line
description, in one layout (XML elements or attributes, markdown headings, lists or tables, a JSON
array, YAML, plain `name - description` / `name: description` lines), announced as skills by a
heading, lead-in line, tag or key within the few lines before it or by its own header, or by
a loader offered to the same model call (a tool whose description says it loads skills,
playbooks, procedures or capabilities). A tool's own description is read alike wherever it is
recorded: in the model's tool definitions or on the span of a call of the tool. A list of tool
definitions (entries with parameters or a schema), a list of the call's own tools (by the one
tool-name comparison: namespaced names too) and examples ("for example", "e.g.") are not
catalogues.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace

from spanjudge.recognition.catalogue_layouts import by_layout
from spanjudge.recognition.evidence import describes_loader
from spanjudge.remembered import remembered_within
from spanjudge.spans import jsonfast
from spanjudge.trajectory.steps import (
    LOADER_DESCRIPTION,
    TRACE_LAYOUT,
    CatalogueEntry,
    CatalogueSource,
)
from spanjudge.trajectory.toolnames import same_tool

_AVAILABLE_SKILLS = re.compile(r"<available_skills>(.*?)</available_skills>", re.DOTALL)
_SKILL_BLOCK = re.compile(
    r"<skill>\s*<name>\s*(.*?)\s*</name>\s*(?:<description>\s*(.*?)\s*</description>)?",
    re.DOTALL,
)
# "- name: description" lists, as several harnesses render their catalogue.
# (the description's trailing blanks are stripped by the reader: a lazy part before `\s*$`
# backtracks quadratically on a long run of blanks)
_SKILL_LINE = re.compile(
    r"^[ \t]*[-*]\s*\**`?([A-Za-z0-9_.:-]+)`?\**\s*[:\u2014-]\s+(\S[^\n]*)$", re.M
)
# A heading or lead-in line that announces the list: "### Available skills", "**Available
# Skills:**", "Available skills:", "The following skills are available:", "... capabilities
# ... can be loaded ...".
_HEADING = re.compile(
    r"^[ \t]*(?![-*+][ \t])(?:#{1,6}[ \t]*|\*\*)?[^\n]{0,60}?"
    r"\b(?:available[ \t]+skills|skills[ \t]+(?:are[ \t]+)?available)\b[^\n]{0,40}$"
    r"|^[^\n]{0,80}\b(?:skills|capabilities)\b[^\n]{0,40}\bcan[ \t]+be[ \t]+loaded\b[^\n]{0,120}$",
    re.I | re.M,
)
# "- name: description", also with the skill's location in brackets after its name:
# "- name (/skills/name) - description"
_ITEM = re.compile(
    r"^[ \t]*[-*][ \t]+(?:\*\*|`)?([A-Za-z0-9][A-Za-z0-9_.:/-]*?)(?:\*\*|`)?"
    r"(?:[ \t]+\([^()\n]{0,200}\))?[ \t]*(?::|\u2014|[ \t]-)[ \t]*(.*)$"
)
# the skill's file after its description, "(file: .../SKILL.md)", on text already stripped
_FILE_SUFFIX = re.compile(r"\((?:file|path|location):[^)]*\)$", re.I)


@remembered_within()  # system prompts and tool descriptions repeat on every model call
def parse_catalogue(
    text: str | None, source: CatalogueSource = TRACE_LAYOUT, *, announced: bool = False
) -> tuple[CatalogueEntry, ...]:
    """Skills offered in a prompt or tool description, in any of the shapes above; ``source``
    says where the text was (a prompt's layout, or a loader tool's description). ``announced``:
    where the text is says it offers skills, so a list in it needs no word that does."""
    if not text:
        return ()
    if not announced and "skill" not in text.lower() and "capabilit" not in text.lower():
        return ()
    entries: dict[str, CatalogueEntry] = {}
    for block in _AVAILABLE_SKILLS.findall(text):
        for name, description in _SKILL_BLOCK.findall(block):
            entries.setdefault(name, CatalogueEntry(name=name, description=description or None))
        if not entries:
            for name, description in _SKILL_LINE.findall(block):
                entries.setdefault(
                    name, CatalogueEntry(name=name, description=description.rstrip())
                )
    for heading in _HEADING.finditer(text):
        for name, description in _listed(text, heading.end()):
            entries.setdefault(name, CatalogueEntry(name=name, description=description or None))
    if not entries:
        for name, description in by_layout(text, announced=announced):
            entries.setdefault(name, CatalogueEntry(name=name, description=description))
    return tuple(replace(e, source=source) for e in entries.values())


def offered_beside_a_loader(
    system: str | None, descriptions: Mapping[str, str]
) -> tuple[CatalogueEntry, ...]:
    """A list of named entries in a model call's system text, where no word announces skills
    but the same call was offered a tool whose description says it loads them ("Fetch the
    playbook for a topic"): the list is what that loader offers. Entries that name one of the
    offered tools (namespaced or not: `mcp__fs__read_file` is `read_file`) list tools or the
    agents offered as tools, not skills; fewer than two left is no catalogue."""
    if not system or not any(describes_loader(d) for d in descriptions.values()):
        return ()
    found = [
        e
        for e in parse_catalogue(system, announced=True)
        if not any(same_tool(tool, e.name) for tool in descriptions)
    ]
    return tuple(found) if len(found) >= 2 else ()


def _listed(text: str, start: int) -> list[tuple[str, str]]:
    """The list items after a heading: blank lines, indented continuation lines and one short
    lead-in paragraph are passed over; anything else ends the list."""
    items: list[tuple[str, str]] = []
    prose = 0
    for line in text[start:].splitlines()[1:]:
        if not line.strip():
            continue
        match = _ITEM.match(line)
        if match is not None:
            description = match.group(2).strip()  # (stripped here: a pattern ending in
            # `[ \t]*$` after a lazy part backtracks quadratically on a long run of blanks)
            items.append((match.group(1), _FILE_SUFFIX.sub("", description).rstrip()))
        elif items and line[:1] in (" ", "\t"):
            continue  # "  -> Read `/skills/x/SKILL.md` for full instructions"
        elif items or line.lstrip().startswith(("#", "**")) or prose >= 2:
            break
        else:
            prose += 1  # "Each skill is a folder with a SKILL.md..." before the list
    return items


@remembered_within()
def tool_catalogue(definitions: str | None) -> tuple[CatalogueEntry, ...]:
    """Skills listed in the descriptions of tool definitions (a JSON list of tools)."""
    if not definitions or "skill" not in definitions.lower():
        return ()
    try:
        tools = jsonfast.parse(definitions)
    except ValueError:
        return ()
    found: list[CatalogueEntry] = []
    for tool in tools if isinstance(tools, list) else [tools]:
        if not isinstance(tool, dict):
            continue
        nested = tool.get("function")
        spec = nested if isinstance(nested, dict) else tool
        description = spec.get("description")
        if isinstance(description, str):
            found.extend(e for e in described_catalogue(description) if e not in found)
    return tuple(found)


@remembered_within()  # a tool's description is recorded on every call of the tool
def described_catalogue(description: str | None) -> tuple[CatalogueEntry, ...]:
    """Skills a tool's own description lists (a loader's "Load a skill ... ## Available
    skills"), read the same from the model's tool definitions and from the span of a call of
    the tool: a run with no model call recording its definitions shows it only there. A
    description that says the tool loads skills announces the list it holds."""
    return parse_catalogue(description, LOADER_DESCRIPTION, announced=describes_loader(description))
