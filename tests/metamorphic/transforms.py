"""Rewrites of an OTLP/JSON export request that change how a session is written, not what
happened in it. Each takes the decoded request and what the untouched report said about the
file (its catalogue, its tool names) and returns the rewritten request."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Iterator
from typing import Any

from tests.support.catalogue_layouts import render

Entries = tuple[tuple[str, str], ...]
StringMap = Callable[[str], str]

_AVAILABLE = re.compile(r"<available_skills>.*?</available_skills>", re.S)
_ANNOUNCING = re.compile(r"skill|capabilit", re.I)
# A SKILL.md body (front matter, or the tags harnesses wrap a loaded body in) is left alone.
_SKILL_BODY = re.compile(r"^\s*---\s*\n\s*name:|<skill_content|<skill name=", re.M)


def spans(request: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for resource in request.get("resourceSpans", ()):
        for scope in resource.get("scopeSpans", ()):
            yield from scope.get("spans", ())


def map_strings(request: dict[str, Any], change: StringMap, *, span_names: bool) -> None:
    """Apply ``change`` to every string attribute value (and to every string inside an attribute
    value that is JSON), and to span names when ``span_names``."""
    for span in spans(request):
        if span_names:
            span["name"] = change(span["name"])
        for attribute in span.get("attributes", ()):
            _map_value(attribute["value"], change)
        for event in span.get("events", ()):
            for attribute in event.get("attributes", ()):
                _map_value(attribute["value"], change)


def _map_value(value: dict[str, Any], change: StringMap) -> None:
    if "stringValue" in value:
        value["stringValue"] = _map_text(value["stringValue"], change)
    for item in value.get("arrayValue", {}).get("values", ()):
        _map_value(item, change)
    for item in value.get("kvlistValue", {}).get("values", ()):
        _map_value(item["value"], change)


def _map_text(text: str, change: StringMap) -> str:
    if text[:1] in "[{":
        try:
            decoded = json.loads(text)
        except ValueError:
            return change(text)
        mapped = _map_json(decoded, change)
        return text if mapped == decoded else json.dumps(mapped, ensure_ascii=False)
    return change(text)


def _map_json(value: Any, change: StringMap) -> Any:
    if isinstance(value, str):
        return _map_text(value, change)
    if isinstance(value, list):
        return [_map_json(v, change) for v in value]
    if isinstance(value, dict):
        return {k: _map_json(v, change) for k, v in value.items()}
    return value


# -- the catalogue, re-rendered --------------------------------------------------------------


def rerender_catalogue(layout: str, entries: Entries) -> StringMap:
    """The catalogue's region of a text (its `<available_skills>` block, or the lines from the
    first entry to the last with the heading that announces them) written in ``layout``."""
    names = [name for name, _ in entries]
    rendered = render(layout, entries)

    def change(text: str) -> str:
        if sum(1 for name in names if name in text) < len(names) or _SKILL_BODY.search(text):
            return text
        if _AVAILABLE.search(text):
            return _AVAILABLE.sub(lambda _: rendered, text, count=1)
        lines = text.split("\n")
        rows = [i for i, line in enumerate(lines) if _entry_line(line, names)]
        if len({_entry_line(lines[i], names) for i in rows}) < len(names):
            return text
        first, last = rows[0], rows[-1]
        while (
            last + 1 < len(lines) and lines[last + 1][:1] in (" ", "\t") and lines[last + 1].strip()
        ):
            last += 1  # "  -> Read `/skills/x/SKILL.md`" continues the last entry
        while first > 0 and (not lines[first - 1].strip() or _ANNOUNCING.search(lines[first - 1])):
            first -= 1
            if lines[first].strip():
                break  # the announcing line itself
        return "\n".join([*lines[:first], rendered, *lines[last + 1 :]])

    return change


def _continues(line: str) -> bool:
    return line[:1] in (" ", "\t") and bool(line.strip())


def _entry_line(line: str, names: list[str]) -> str | None:
    stripped = line.strip().lstrip("-*0123456789.) ").strip("*`")
    for name in names:
        if stripped.startswith(name) and stripped[len(name) : len(name) + 4].strip(" *`")[:1] in (
            ":",
            "-",
            "\u2014",
        ):
            return name
    return None


# -- tool names under a namespace ---------------------------------------------------------


def namespace_tools(prefix: str, tools: frozenset[str]) -> StringMap:
    """Every string that is a tool's name, and a span name's word that is one, prefixed."""

    def change(text: str) -> str:
        if text in tools:
            return prefix + text
        if _SKILL_BODY.search(text):
            return text
        head, _, tail = text.rpartition(" ")
        if head and tail in tools and len(head.split()) == 1:  # "execute_tool read_csv"
            return f"{head} {prefix}{tail}"
        return text

    return change


# -- order ---------------------------------------------------------------------------------


def shuffle_order(request: dict[str, Any], rng: random.Random) -> None:
    """Attributes of every span and resource, and the spans of every scope, in another order."""
    for resource in request.get("resourceSpans", ()):
        rng.shuffle(resource.get("resource", {}).get("attributes", []))
        for scope in resource.get("scopeSpans", ()):
            rng.shuffle(scope.get("spans", []))
    for span in spans(request):
        rng.shuffle(span.get("attributes", []))
