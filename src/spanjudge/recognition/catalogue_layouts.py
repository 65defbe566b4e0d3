"""A skill catalogue recognised by evidence, whatever its layout (`catalogue.py` tries the shapes
harnesses are known to write first).

Each layout reader finds runs of entries: consecutive (name, description) pairs written the same
way. A run is a catalogue when it has two or more entries with skill-like names (one word) and
one-line descriptions, and something says they are skills: a heading, lead-in line, tag or key
mentioning skills within the few lines before the run, or the run's own header (a table's, an
element's), or, whatever the run is called ("playbooks", "procedures"), one of its names is a
skill the session shows elsewhere (``known``: the skills directory, a SKILL.md's front matter, a
load). Entries that carry parameters or a schema are tool definitions, a run introduced as
an example is an example, and one whose lead-in line names tools ("Use these tools:") lists
tools: none is a catalogue.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterator

from spanjudge.trajectory.toolnames import same_tool

Run = tuple[int, int, list[tuple[str, str]]]  # start, end, entries

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,79}")
_WRAP = "`*\"'"  # markup around a name: `name`, **name**, "name"
# What announces skills: a word, a tag (`<available_skills>`) or a key (`"skills":`).
_ANNOUNCE = re.compile(r"skill|capabilit", re.I)
_EXAMPLE = re.compile(r"\bexamples?\b|\be\.g\.|\bfor instance\b|\bsample\b", re.I)
# A lead-in that names tools as what follows ("Use these tools:", "## Tools"): a list of tools
_TOOLS_LEAD = re.compile(r"\btools\W*$", re.I)
_LOOKBACK_LINES = 3
# Keys of a tool definition: such an entry is a tool, not a skill.
_TOOL_KEYS = frozenset(
    {"parameters", "input_schema", "inputSchema", "args_schema", "function", "schema"}
)
_NAME_KEYS = ("name", "skill", "id", "title")
_DESCRIPTION_KEYS = ("description", "desc", "summary", "when_to_use", "purpose")

_XML_ELEMENT = re.compile(
    r"<([A-Za-z][\w-]*)\b[^>]*>\s*<name>\s*([^<]*?)\s*</name>\s*"
    r"<description>\s*([^<]*?)\s*</description>\s*(?:<[^/][^>]*>[^<]*</[^>]+>\s*)*</\1>"
)
# `<skill name="x" description="..."/>`, `<skill name="x">text</skill>`, the text alone on its line
# between the tags: one line, starting and ending with a non-space (the whitespace around it
# cannot also be read as part of it)
_XML_ATTRIBUTES = re.compile(
    r"<([A-Za-z][\w-]*)\s+(?:[\w-]+=\"[^\"]*\"\s+)*?name=\"([^\"]+)\"([^>]*?)"
    r"(?:/>|>\s*(?:([^<\s](?:[^<\n]*[^<\s])?)\s*)?</\1>)"
)
_DESCRIPTION_ATTR = re.compile(r"\b(?:description|desc|summary)=\"([^\"]*)\"")
_HEADING = re.compile(r"^(#{1,6})[ \t]+(\S[^\n]*?)[ \t]*#*[ \t]*$", re.M)
_SECTION_BODY = re.compile(r"#|[-*+\u2022][ \t]|\d{1,3}[.)][ \t]|\|")
_TABLE_ROW = re.compile(r"^[ \t]*\|(.+)\|[ \t]*$")
_TABLE_RULE = re.compile(r"^[ \t]*\|?[ \t:|-]+\|?[ \t]*$")
# "- name: description", "* **name** - description", "1. name — description", "name: description",
# the name followed by the skill's location in brackets: "- name (/skills/name) - description"
_LINE = re.compile(
    r"^[ \t]*(?:[-*+•][ \t]+|\d{1,3}[.)][ \t]+)?"
    r"([`*\"']{0,2}[A-Za-z0-9][A-Za-z0-9_.:-]*?[`*\"']{0,2})(?:[ \t]+\([^()\n]{0,200}\))?"
    r"[ \t]*(?::|[ \t]-{1,2}|[ \t]\u2013|[ \t]?\u2014)[ \t]+(\S.*)$"
)
# (each value's trailing blanks are stripped by the reader: a lazy part before `[ \t]*$` would
# backtrack quadratically on a long run of blanks)
_YAML_NAME = re.compile(r"^([ \t]*)(?:-[ \t]+)?name:[ \t]*(.+)$")
_YAML_DESCRIPTION = re.compile(r"^[ \t]*(?:description|desc|summary):[ \t]*(.+)$")


def by_layout(
    text: str,
    known: Collection[str] = (),
    *,
    announced: bool = False,
    tools: Collection[str] = (),
) -> list[tuple[str, str]]:
    """Entries of every run in ``text`` that is a catalogue, in order, each name once; a run
    naming one of the ``known`` skills needs nothing else to say it lists skills, nor does any
    run of a text ``announced`` as offering skills by where it is. A run naming one of the
    session's ``tools`` (one it offers or calls) that is no known skill lists tools ("Use these
    tools: - list_skills: list available skills"), not skills. A text whose line breaks were
    printed as runs of spaces (a tool's description on one line of a prompt's tool list) is
    read with them back, where it shows none as it is."""
    found = _by_layout(text, known, announced, tools)
    if not found and _FLATTENED_LINE.search(text):
        found = _by_layout(_LINE_STARTS.sub("\n", text), known, announced, tools)
    return found


# Where a flattened text's lines began: two or more spaces before a list item or a heading,
# and a closing tag (the end of the element the text was printed in).
# (A run is matched from its first blank only: tried from inside a long run of blanks, the
# pattern would backtrack quadratically.)
_FLATTENED_LINE = re.compile(r"(?<![ \t])[ \t]{2,}(?=(?:[-*+\u2022]|\d{1,3}[.)]|#{1,6})[ \t])")
_LINE_STARTS = re.compile(rf"{_FLATTENED_LINE.pattern}|(?=</[A-Za-z])")


def _by_layout(
    text: str, known: Collection[str], announced: bool, tools: Collection[str]
) -> list[tuple[str, str]]:
    out: dict[str, str] = {}
    for reader in (_xml_elements, _xml_attributes, _json_arrays, _tables, _yaml, _headings, _lines):
        for start, end, entries in reader(text):
            if _is_catalogue(
                text, start, end, entries, known, announced=announced
            ) and not _names_tools(entries, known, tools):
                for name, description in entries:
                    out.setdefault(name, description)
        if out:
            break  # one layout per text: a catalogue is written one way
    return list(out.items())


def _is_catalogue(
    text: str,
    start: int,
    end: int,
    entries: list[tuple[str, str]],
    known: Collection[str] = (),
    *,
    announced: bool = False,
) -> bool:
    names = {name for name, _ in entries}
    if len(names) < 2:
        return False
    before = text[:start].splitlines()[-_LOOKBACK_LINES:]
    lead = "\n".join(before)
    head = text[start:end].split("\n", 1)[0]  # a table's header, an element's tag
    if _EXAMPLE.search(lead):
        return False
    nearest = next((line for line in reversed(before) if line.strip()), "")
    if _TOOLS_LEAD.search(nearest) and not _ANNOUNCE.search(nearest):
        return False  # "Use these tools:" then "- list_skills: list available skills"
    return bool(
        announced or _ANNOUNCE.search(lead) or _ANNOUNCE.search(head) or not names.isdisjoint(known)
    )


def _names_tools(
    entries: list[tuple[str, str]], known: Collection[str], tools: Collection[str]
) -> bool:
    """One of the entries is a tool of the session, and no skill it knows by that name."""
    return any(
        name not in known and any(same_tool(tool, name) for tool in tools) for name, _ in entries
    )


def _name(raw: str) -> str | None:
    name = raw.strip().strip(_WRAP).strip()
    return name if _NAME.fullmatch(name) else None


# The longest description of an entry read from text, where a longer one is more likely the
# next lines run on; and of a value a key delimits, the longest a skill's front matter may hold
# (the Agent Skills specification).
_DESCRIPTION_CHARS = 500
_KEYED_DESCRIPTION_CHARS = 1024


def _description(raw: str | None, limit: int = _DESCRIPTION_CHARS) -> str | None:
    text = " ".join((raw or "").split())
    return text if text and len(text) <= limit else None


def _pair(
    raw_name: str, raw_description: str | None, limit: int = _DESCRIPTION_CHARS
) -> tuple[str, str] | None:
    name, description = _name(raw_name), _description(raw_description, limit)
    return (name, description) if name and description else None


def _runs(matches: Iterator[tuple[int, int, tuple[str, str] | None]], text: str) -> list[Run]:
    """Group consecutive matches (nothing but whitespace between them) into runs."""
    runs: list[Run] = []
    for start, end, pair in matches:
        if pair is None:
            continue
        if runs and not text[runs[-1][1] : start].strip():
            runs[-1] = (runs[-1][0], end, [*runs[-1][2], pair])
        else:
            runs.append((start, end, [pair]))
    return runs


def _xml_elements(text: str) -> list[Run]:
    found = ((m.start(), m.end(), _pair(m[2], m[3])) for m in _XML_ELEMENT.finditer(text))
    return _runs(found, text)


def _xml_attributes(text: str) -> list[Run]:
    def pair(m: re.Match[str]) -> tuple[str, str] | None:
        described = _DESCRIPTION_ATTR.search(m[3])
        return _pair(m[2], described[1] if described else m[4])

    return _runs(((m.start(), m.end(), pair(m)) for m in _XML_ATTRIBUTES.finditer(text)), text)


def _json_arrays(text: str) -> list[Run]:
    decoder = json.JSONDecoder()
    runs: list[Run] = []
    position = text.find("[")
    while position != -1:
        try:
            value, end = decoder.raw_decode(text, position)
        except ValueError:
            position = text.find("[", position + 1)
            continue
        entries = _json_entries(value)
        if entries:
            runs.append((position, end, entries))
        position = text.find("[", end)
    return runs


def _json_entries(value: object) -> list[tuple[str, str]]:
    if not isinstance(value, list):
        return []
    entries = []
    for item in value:
        if not isinstance(item, dict) or _TOOL_KEYS.intersection(item):
            return []
        name = next((item[k] for k in _NAME_KEYS if isinstance(item.get(k), str)), None)
        described = next((item[k] for k in _DESCRIPTION_KEYS if isinstance(item.get(k), str)), None)
        pair = _pair(name, described, _KEYED_DESCRIPTION_CHARS) if name else None
        if pair is None:
            return []
        entries.append(pair)
    return entries


def _tables(text: str) -> list[Run]:
    """Markdown tables: the name in the first column, the description in the next."""
    runs: list[Run] = []
    offset = 0
    current: list[tuple[str, str]] = []
    start = 0
    header = True
    for line in text.splitlines(keepends=True):
        row = _TABLE_ROW.match(line)
        if row is None:
            if current:
                runs.append((start, offset, current))
            current, header = [], True
        elif _TABLE_RULE.match(line):
            pass
        elif header:
            start, header = offset, False  # the header row: its words may announce skills
        else:
            cells = [c.strip() for c in row[1].split("|")]
            pair = _pair(cells[0], cells[1]) if len(cells) >= 2 else None
            if pair is not None:
                current.append(pair)
        offset += len(line)
    if current:
        runs.append((start, offset, current))
    return runs


def _yaml(text: str) -> list[Run]:
    """`- name: x` followed by `description: y` (a YAML list of mappings)."""
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    found = []
    for i, line in enumerate(lines):
        named = _YAML_NAME.match(line)
        if named is None:
            continue
        for follow in lines[i + 1 : i + 4]:
            described = _YAML_DESCRIPTION.match(follow)
            if described is not None:
                end = starts[lines.index(follow, i + 1) + 1]
                description = described[1].rstrip().strip("\"'")
                found.append((starts[i], end, _pair(named[2].rstrip(), description)))
                break
    return _runs(iter(found), text)


def _headings(text: str) -> list[Run]:
    """Sibling markdown headings, each a name followed by its one-paragraph description."""
    heads = list(_HEADING.finditer(text))
    runs: list[Run] = []
    levels: list[int] = []
    for i, head in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        paragraph = text[head.end() : end].strip().split("\n\n", 1)[0]
        # a heading over a list or table ("## Playbooks" then "- name: ...") titles a section
        entry = paragraph and not _SECTION_BODY.match(paragraph)
        pair = _pair(head[2], paragraph) if entry else None
        if pair is None:
            continue
        end = text.index(paragraph, head.end()) + len(paragraph)
        level = len(head[1])
        if runs and not text[runs[-1][1] : head.start()].strip() and levels[-1] == level:
            runs[-1] = (runs[-1][0], end, [*runs[-1][2], pair])
        else:
            runs.append((head.start(), end, [pair]))
            levels.append(level)
    return runs


def _lines(text: str) -> list[Run]:
    """One entry a line: markdown list items or plain `name - description` lines (blank lines
    between them allowed)."""
    found = []
    offset = 0
    for line in text.splitlines(keepends=True):
        match = _LINE.match(line.rstrip("\n"))
        pair = _pair(match[1], match[2].rstrip()) if match else None
        found.append((offset, offset + len(line), pair))
        offset += len(line)
    return _runs(iter(found), text)
