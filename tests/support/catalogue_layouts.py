"""One skill catalogue written in the layouts agents use, for recognition and metamorphic tests.
Each says, as a harness would, that the entries are skills (a heading, a tag, a key)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

Skills = Sequence[tuple[str, str]]


def _xml_elements(skills: Skills) -> str:
    entries = "".join(
        f"  <skill>\n    <name>{n}</name>\n    <description>{d}</description>\n  </skill>\n"
        for n, d in skills
    )
    return f"## Skills\n\n<skills>\n{entries}</skills>"


def _xml_attributes(skills: Skills) -> str:
    entries = "".join(f'  <skill name="{n}">{d}</skill>\n' for n, d in skills)
    return f"<available_skills>\n{entries}</available_skills>"


def _xml_attribute_blocks(skills: Skills) -> str:
    entries = "\n".join(f'<skill name="{n}">\n{d}\n</skill>\n' for n, d in skills)
    return f"<available_skills>\nThese skills are not loaded yet.\n\n{entries}</available_skills>"


def _markdown_list(skills: Skills) -> str:
    return "Skills you can use:\n\n" + "\n".join(f"* **{n}** - {d}" for n, d in skills)


def _markdown_list_on_one_line(skills: Skills) -> str:
    # a description printed on one line of a prompt's tool list: its line breaks as spaces
    return "## Available skills  " + "  ".join(f"- {n}: {d}" for n, d in skills)


def _markdown_table(skills: Skills) -> str:
    rows = "\n".join(f"| `{n}` | {d} |" for n, d in skills)
    return f"### Skills\n\n| Skill | What it does |\n|---|---|\n{rows}"


def _markdown_headings(skills: Skills) -> str:
    return "## Skills\n\n" + "\n\n".join(f"### {n}\n{d}" for n, d in skills)


def _json_array(skills: Skills) -> str:
    entries = [{"name": n, "description": d} for n, d in skills]
    return "Skills (JSON):\n" + json.dumps(entries, indent=2)


def _yaml(skills: Skills) -> str:
    entries = "".join(f"  - name: {n}\n    description: {json.dumps(d)}\n" for n, d in skills)
    return f"skills:\n{entries}"


def _markdown_list_with_locations(skills: Skills) -> str:
    # each skill's folder in brackets after its name
    return "Available skills:\n" + "\n".join(f"- {n} (/skills/{n}) - {d}" for n, d in skills)


def _plain_dash_lines(skills: Skills) -> str:
    return "Skills:\n" + "\n".join(f"{n} - {d}" for n, d in skills)


def _plain_colon_lines(skills: Skills) -> str:
    return "The skills below are yours to use.\n" + "\n".join(f"{n}: {d}" for n, d in skills)


LAYOUTS: dict[str, Callable[[Skills], str]] = {
    "xml_elements": _xml_elements,
    "xml_attributes": _xml_attributes,
    "xml_attribute_blocks": _xml_attribute_blocks,
    "markdown_list": _markdown_list,
    "markdown_list_on_one_line": _markdown_list_on_one_line,
    "markdown_list_with_locations": _markdown_list_with_locations,
    "markdown_table": _markdown_table,
    "markdown_headings": _markdown_headings,
    "json_array": _json_array,
    "yaml": _yaml,
    "plain_dash_lines": _plain_dash_lines,
    "plain_colon_lines": _plain_colon_lines,
}


def render(layout: str, skills: Skills) -> str:
    return LAYOUTS[layout](skills)
