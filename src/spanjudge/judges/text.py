"""Text helpers for the heuristic judge: tokens, SKILL.md front matter and step parsing."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from spanjudge.remembered import remembered_when_short, remembered_within
from spanjudge.trajectory.toolnames import SEPARATORS

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "could",
        "do",
        "does",
        "for",
        "from",
        "get",
        "give",
        "has",
        "have",
        "how",
        "i",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "need",
        "of",
        "on",
        "or",
        "our",
        "please",
        "should",
        "so",
        "some",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "these",
        "this",
        "those",
        "to",
        "up",
        "us",
        "use",
        "using",
        "via",
        "want",
        "was",
        "we",
        "what",
        "when",
        "whenever",
        "which",
        "while",
        "who",
        "will",
        "with",
        "would",
        "you",
        "your",
        "one",
        "all",
        "also",
        "just",
        "make",
        "like",
        "let",
        "lets",
        "skill",
        "skills",
        "user",
        "asks",
        "ask",
        "answer",
        "tool",
        "tools",
        "file",
        "files",
    ]
)
_NUMBERED = re.compile(r"^ {0,3}(\d{1,3})[.)]\s+(.*\S)")
_BULLET = re.compile(r"^ {0,3}[-*+]\s+(.*\S)")
_HEADING = re.compile(r"^#{1,6}\s+(.*)")
_BACKTICK = re.compile(r"`([^`\n]{1,200})`")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:-]*$")
_ANSWER_VERBS = ("answer", "reply", "respond", "return", "tell", "report back", "summarise to")
# A step the body insists on ("always", "must", "never skip") or a check that guards what follows
# ("check availability before booking"): skipping it is more than one step of four.
_REQUIRED = re.compile(
    r"\b(must|always|required|requires|mandatory|never skip|do not skip|don't skip|"
    r"make sure|ensure|verify|check|confirm|validate|before|only after|never)\b",
    re.IGNORECASE,
)


@remembered_when_short(maxsize=16384)  # a long run of letters (a blob, an id) is not kept
def stem(word: str) -> str:
    """A deliberately small suffix stripper: enough to match 'reports' with 'report'."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 5 and word.endswith("ing"):
        return word[:-3]
    if len(word) > 4 and word.endswith("ed"):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


# Texts up to this size have their tokens cached: catalogue entries, requests and skill steps
# recur in every session of a deployment.
_CACHED_TOKENS_MAX_CHARS = 2048


def tokens(text: str | None) -> set[str]:
    """Lower-cased, stemmed content words; identifiers such as read_csv split into parts."""
    if not text:
        return set()
    if len(text) <= _CACHED_TOKENS_MAX_CHARS:
        return set(_cached_tokens(text))
    return _tokens(text)


@remembered_within(max_entries=4096)
def _cached_tokens(text: str) -> frozenset[str]:
    return frozenset(_tokens(text))


def _tokens(text: str) -> set[str]:
    words = _WORD.findall(text.lower().replace("_", " ").replace("-", " "))
    return {stem(w) for w in words if w not in _STOP and len(w) > 1}


@dataclass(frozen=True, slots=True, kw_only=True)
class SkillStep:
    """One instruction of a SKILL.md body."""

    index: int
    text: str
    tools: tuple[str, ...]
    answer: bool
    required: bool = False
    # The words of the step that say what it is about (answer verbs and tool names aside).
    subject: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True, kw_only=True)
class SkillDoc:
    name: str | None
    description: str | None
    steps: tuple[SkillStep, ...]


def _front_matter(body: str) -> tuple[dict[str, str], str]:
    lines = body.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        return {}, body
    meta: dict[str, str] = {}
    for i, line in enumerate(lines[1:], start=1):
        if line.strip() == "---":
            return meta, "\n".join(lines[i + 1 :])
        key, sep, value = line.partition(":")
        if sep and key.strip() and not key.startswith((" ", "\t")):
            meta[key.strip().lower()] = value.strip().strip("\"'")
    return {}, body


def _items(text: str) -> list[str]:
    """Numbered items anywhere, else bullets under a step-like heading, else all bullets."""
    numbered: list[str] = []
    bullets: list[tuple[str, bool]] = []
    in_steps = False
    current: list[str] | None = None
    for line in text.splitlines():
        heading = _HEADING.match(line)
        if heading:
            title = heading.group(1).lower()
            in_steps = any(w in title for w in ("step", "instruction", "procedure", "workflow"))
            current = None
            continue
        if m := _NUMBERED.match(line):
            numbered.append(m.group(2))
            current = numbered
        elif m := _BULLET.match(line):
            bullets.append((m.group(1), in_steps))
            current = None
        elif current is numbered and line.startswith((" ", "\t")) and line.strip() and numbered:
            numbered[-1] += " " + line.strip()  # wrapped continuation of the last item
        elif not line.strip():
            current = None
    if numbered:
        return numbered
    under_heading = [text for text, flagged in bullets if flagged]
    return under_heading or [text for text, _ in bullets]


def _tool_refs(text: str) -> tuple[str, ...]:
    refs = []
    for raw in _BACKTICK.findall(text):
        candidate = raw.strip().rstrip("()")
        # Paths and values (out/report.md, 42) are arguments, not tool names.
        if _IDENT.match(candidate) and "/" not in candidate and not candidate[0].isdigit():
            if "." in candidate and candidate.rsplit(".", 1)[1] in ("md", "csv", "json", "txt"):
                continue
            refs.append(candidate)
    return tuple(dict.fromkeys(refs))


_GUARD_TOOL = re.compile(r"(?:^|[_.-])(?:check|verify|validate|confirm)(?:[_.-]|$)", re.I)
_ANSWER_WORDS = frozenset({"answer", "reply", "respond", "return", "tell", "back", "summarise"})


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n")


def _insisting(text: str) -> str:
    """The body's sentences that insist on something, one a line: a tool named in one of them
    (a name holds no line break) is `tool in` the result, found once a tool, not once a
    sentence and tool."""
    return "\n".join(s for s in _SENTENCE_END.split(text) if _REQUIRED.search(s))


@remembered_within(max_entries=128)  # the same few skills load in every session; frozen
def parse_skill(body: str) -> SkillDoc:
    """Split a SKILL.md body into front matter and ordered steps."""
    meta, text = _front_matter(body)
    insisting = _insisting(text)
    steps = []
    for i, item in enumerate(_items(text)):
        tools = _tool_refs(item)
        plain = item.lower().lstrip("*_ ")
        answer = not tools and plain.startswith(_ANSWER_VERBS)
        insisted = (
            bool(_REQUIRED.search(item))
            or any(t in insisting for t in tools)
            # a guard by its very name (check_availability, validate_order)
            or any(_GUARD_TOOL.search(t) for t in tools)
        )
        steps.append(
            SkillStep(
                index=i + 1,
                text=item,
                tools=tools,
                answer=answer,
                required=bool(tools) and insisted,
                subject=frozenset(tokens(_BACKTICK.sub(" ", item)) - _ANSWER_WORDS),
            )
        )
    return SkillDoc(name=meta.get("name"), description=meta.get("description"), steps=tuple(steps))


_TRIGGER = re.compile(r"\b(?:when|whenever|if)\b(.*)", re.IGNORECASE | re.DOTALL)


# Every session of an agent offers the same catalogue: its entries' words are read once.
@remembered_within()
def entry_terms(name: str, description: str | None) -> tuple[frozenset[str], frozenset[str]]:
    """(the words of a skill's name, those of its name and description)."""
    name_terms = frozenset(tokens(name))
    return name_terms, name_terms | tokens(description)


@remembered_within()
def trigger_topics(description: str) -> frozenset[str] | None:
    """What a description says to use the skill for ("when the user asks about ..."), if it
    says."""
    found = _TRIGGER.search(description)
    return frozenset(tokens(found.group(1))) if found else None


@remembered_within()  # a skill's steps name the same tools in every session
def tool_names(tools: tuple[str, ...]) -> tuple[frozenset[str], tuple[str, ...]]:
    """A step's tools lower-cased, and the suffixes that name them as well: the tool after a
    namespace separator (``ops-read_csv``, ``files.read_csv``, ``mcp__files__read_csv``: the
    separators of `trajectory/toolnames.py`) or a word prefix (``mcp_read_csv``)."""
    lowered = [t.lower() for t in tools]
    return frozenset(lowered), tuple(p + t for t in lowered for p in ("_", *SEPARATORS))


@remembered_within()
def closest_name(chosen: str, offered: tuple[str, ...]) -> str | None:
    """The offered name closest to ``chosen`` (difflib, cutoff 0.6), or None. An agent that calls
    a skill by a name its catalogue does not offer does so session after session: worked out
    once per name and catalogue."""
    close = difflib.get_close_matches(chosen, list(offered), n=1, cutoff=0.6)
    return close[0] if close else None


def align(hits: Sequence[Sequence[bool]]) -> list[tuple[int, int]]:
    """Longest in-order alignment of skill steps with events (LCS), one event per step:
    ``hits[i][j]`` says whether event ``j`` evidences step ``i``. Returns (step, event) index
    pairs."""
    n = len(hits)
    m = len(hits[0]) if n else 0
    table = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        row, here, below = hits[i], table[i], table[i + 1]
        for j in range(m - 1, -1, -1):
            if row[j]:
                here[j] = 1 + below[j + 1]
            else:
                here[j] = max(below[j], here[j + 1])
    pairs = []
    i = j = 0
    while i < n and j < m:
        if hits[i][j] and table[i][j] == 1 + table[i + 1][j + 1]:
            pairs.append((i, j))
            i += 1
            j += 1
        elif table[i + 1][j] >= table[i][j + 1]:
            i += 1
        else:
            j += 1
    return pairs
