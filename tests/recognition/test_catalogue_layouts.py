"""A catalogue is recognised by what it is (two or more skill names, each with a description,
announced as skills), not by the layout one harness happens to write."""

from __future__ import annotations

import json

import pytest

from spanjudge.recognition.catalogue import parse_catalogue, tool_catalogue
from tests.support.catalogue_layouts import LAYOUTS, render

SKILLS = [
    ("csv-report", "Summarise a CSV file into a report."),
    ("incident-triage", "Triage a production incident."),
    ("currency_report", "Convert amounts between currencies and report the rate."),
]
PROMPT = "You are a helpful agent.\n\n{catalogue}\n\nAnswer briefly."


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_every_layout_is_read(layout: str) -> None:
    text = PROMPT.format(catalogue=render(layout, SKILLS))
    assert [(e.name, e.description) for e in parse_catalogue(text)] == SKILLS


def test_elements_under_an_available_skills_heading() -> None:
    entries = "\n".join(
        f"<skill><name>{n}</name><description>{d}</description></skill>" for n, d in SKILLS
    )
    text = f"You help.\n\n## Available Skills\n\n{entries}\n\nUse them."
    assert [(e.name, e.description) for e in parse_catalogue(text)] == SKILLS


def test_names_as_attributes_inside_available_skills() -> None:
    entries = "\n".join(f'<skill name="{n}">{d}</skill>' for n, d in SKILLS)
    text = f"You help.\n<available_skills>\n{entries}\n</available_skills>"
    assert [(e.name, e.description) for e in parse_catalogue(text)] == SKILLS


def test_a_catalogue_is_reported_as_read_from_the_trace_or_a_loader_description() -> None:
    text = PROMPT.format(catalogue=render("markdown_table", SKILLS))
    assert {e.source for e in parse_catalogue(text)} == {"trace_layout"}
    definitions = json.dumps([{"name": "load_skill", "description": text}])
    assert {e.source for e in tool_catalogue(definitions)} == {"loader_description"}


def test_tool_definitions_are_not_a_catalogue() -> None:
    tools = [{"name": n, "description": d, "parameters": {"type": "object"}} for n, d in SKILLS]
    text = f"You can use skills and tools.\nTools:\n{json.dumps(tools)}"
    assert parse_catalogue(text) == ()


def test_examples_are_not_a_catalogue() -> None:
    text = (
        "Skills are listed by the harness. For example:\n"
        "- pdf-report: Make a PDF report.\n- slide-deck: Make slides.\n"
    )
    assert parse_catalogue(text) == ()


def test_one_entry_or_an_unannounced_list_is_not_a_catalogue() -> None:
    one = PROMPT.format(catalogue=render("markdown_list", SKILLS[:1]))
    assert parse_catalogue(one) == ()
    steps = "Use the skill well.\n\n\n\nSteps:\n- read: Read the file.\n- write: Write it."
    assert parse_catalogue(steps) == ()


def test_a_loaded_skill_body_in_a_skill_element_is_not_a_catalogue() -> None:
    body = "# CSV report\n\n1. Read the CSV.\n2. Write the report.\n"
    text = f'<skill name="csv-report" path="/s/SKILL.md">\n{body}</skill>\n' * 2
    assert parse_catalogue(text) == ()


def test_a_json_catalogue_keeps_a_description_as_long_as_front_matter_allows() -> None:
    long = "Configure the harness through its settings file. " * 14  # about 700 characters
    skills = [*SKILLS, ("update-config", long.strip())]
    text = PROMPT.format(catalogue=render("json_array", skills))
    assert [e.name for e in parse_catalogue(text)] == [n for n, _ in skills]


def test_a_skill_named_again_further_on_keeps_the_catalogue() -> None:
    catalogue = render("markdown_list", SKILLS)
    text = f"{catalogue}\n\n## Notes\n\n- csv-report: always attach the source file.\n"
    assert [e.name for e in parse_catalogue(text)] == [n for n, _ in SKILLS]
