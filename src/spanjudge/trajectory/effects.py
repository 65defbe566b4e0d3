"""What a tool call does to the world: its effect class and the resource it touches.

Used for backtracks (ARCHITECTURE.md section 4) and by the `side_effects` evaluator. Defaults go by
tool-name pattern; configuration can override any tool. A namespaced name (`ops-delete_file`)
is classified by its base name when the whole name says nothing (`trajectory/toolnames.py`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from spanjudge.remembered import SHORT_CHARS, remembered_when_short
from spanjudge.trajectory.toolnames import candidates

Effect = Literal["read", "create", "modify", "delete", "external"]


EFFECTS: tuple[Effect, ...] = get_args(Effect)

# Checked in order; the first pattern that matches the tool name (case-insensitive) wins.
DEFAULT_EFFECT_PATTERNS: tuple[tuple[str, Effect], ...] = (
    (r"(^|_)(delete|remove|rm|rmdir|unlink|drop|destroy|purge|truncate)(_|$)", "delete"),
    (r"(^|_)(create|mkdir|insert|add|new|open_ticket|touch|upload)(_|$)|^create_", "create"),
    (r"(^|_)(write|save|put|store|append)(_|$)|^write$|^Write$", "create"),
    (
        r"(^|_)(update|edit|modify|patch|replace|set|rename|move|mv)(_|$)|^(Edit|MultiEdit)$",
        "modify",
    ),
    (r"(^|_)(send|post|email|notify|publish|deploy|http|fetch_url|webhook|pay)(_|$)", "external"),
    (
        r"(^|_)(read|get|list|search|find|query|view|cat|ls|grep|glob|load|fetch|calculate)(_|$)"
        r"|^(Read|Glob|Grep|LS)$",
        "read",
    ),
)
RESOURCE_ARGS: tuple[str, ...] = ("path", "file_path", "filename", "file", "key", "id")
_KNOWN_SIZE = 4096  # tool names whose effect one map remembers


@dataclass(frozen=True, slots=True, kw_only=True)
class EffectMap:
    """Effect per tool: explicit overrides first, then the default patterns."""

    overrides: Mapping[str, Effect] = field(default_factory=dict)
    patterns: tuple[tuple[str, Effect], ...] = DEFAULT_EFFECT_PATTERNS
    resource_args: tuple[str, ...] = RESOURCE_ARGS
    # tool name -> its effect under this map: one map serves every session, whose calls name
    # the same few tools (short names only, at most `_KNOWN_SIZE`; `replace` starts a new one)
    _known: dict[str, Effect | None] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def effect(self, tool_name: str) -> Effect | None:
        """An override of the name or its base name (`ops-delete_file` -> `delete_file`), else
        the first pattern that classifies either."""
        known = self._known
        try:  # one lookup: another thread may clear it
            return known[tool_name]
        except KeyError:
            pass
        effect = self._effect(tool_name)
        if len(tool_name) <= SHORT_CHARS:
            if len(known) >= _KNOWN_SIZE:
                known.clear()
            known[tool_name] = effect
        return effect

    def _effect(self, tool_name: str) -> Effect | None:
        names = candidates(tool_name)
        for name in names:
            if name in self.overrides:
                return self.overrides[name]
        for name in names:
            effect = _classify(self.patterns, name)
            if effect is not None:
                return effect
        return None

    def resource(self, arguments: Any) -> str | None:
        """The path-like argument a call acts on, normalised (`./out/a` and `out/a` agree)."""
        if not isinstance(arguments, Mapping):
            return None
        for key in self.resource_args:
            value = arguments.get(key)
            if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value):
                text = str(value).strip()
                while text.startswith("./"):
                    text = text[2:]
                return text
        return None


# DEFAULT_EFFECT_PATTERNS without compiling them (six patterns, a millisecond of a small run):
# per pattern, its `(^|_)(word|...)(_|$)` words, then its `^name$` names and `^prefix` prefixes.
_DEFAULT_RULES: tuple[tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], Effect], ...] = (
    (
        ("delete", "remove", "rm", "rmdir", "unlink", "drop", "destroy", "purge", "truncate"),
        (),
        (),
        "delete",
    ),
    (
        ("create", "mkdir", "insert", "add", "new", "open_ticket", "touch", "upload"),
        (),
        ("create_",),
        "create",
    ),
    (("write", "save", "put", "store", "append"), ("write", "Write"), (), "create"),
    (
        ("update", "edit", "modify", "patch", "replace", "set", "rename", "move", "mv"),
        ("Edit", "MultiEdit"),
        (),
        "modify",
    ),
    (
        (
            "send",
            "post",
            "email",
            "notify",
            "publish",
            "deploy",
            "http",
            "fetch_url",
            "webhook",
            "pay",
        ),
        (),
        (),
        "external",
    ),
    (
        (
            "read",
            "get",
            "list",
            "search",
            "find",
            "query",
            "view",
            "cat",
            "ls",
            "grep",
            "glob",
            "load",
            "fetch",
            "calculate",
        ),
        ("Read", "Glob", "Grep", "LS"),
        (),
        "read",
    ),
)


def _rule_matches(
    words: tuple[str, ...], names: tuple[str, ...], prefixes: tuple[str, ...], text: str
) -> bool:
    """``re.search`` of the rule's pattern: `(^|_)word(_|$)` is `_word_` inside `_text_`, and
    `$` also matches before a final newline (so does `^name$`)."""
    ends = (text, text[:-1]) if text.endswith("\n") else (text,)
    for end in ends:
        padded = f"_{end}_"
        if any(f"_{word}_" in padded for word in words):
            return True
    return text.startswith(prefixes) or any(end in names for end in ends)


@remembered_when_short(maxsize=4096)
def _classify(patterns: tuple[tuple[str, Effect], ...], tool_name: str) -> Effect | None:
    # Tool names repeat across every session: classify each once per pattern table.
    lowered = tool_name.lower()
    if patterns == DEFAULT_EFFECT_PATTERNS:
        for words, names, prefixes, effect in _DEFAULT_RULES:
            if _rule_matches(words, names, prefixes, lowered) or _rule_matches(
                words, names, prefixes, tool_name
            ):
                return effect
        return None
    for pattern, effect in patterns:
        compiled = re.compile(pattern)
        if compiled.search(lowered) or compiled.search(tool_name):
            return effect
    return None


DEFAULT_EFFECT_MAP = EffectMap()
