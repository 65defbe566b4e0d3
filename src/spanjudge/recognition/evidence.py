"""The evidence rules every convention preset shares (ARCHITECTURE.md section 2).

A preset only says where a framework keeps the facts of a tool call (`tool_step`); whether the
call was a skill load, which skill, and whether it succeeded is decided here, from what the
trace shows: a skill named in the arguments, a `SKILL.md` path in any string argument (shell
commands included), a SKILL.md body in the result, and error evidence anywhere in the payload.
Tool names matter only as one kind of evidence among several (a known loader with a skill
argument), never as the only way in.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from spanjudge.recognition.base import (
    as_text,
    error_in_payload,
    is_refusal,
    joined_text_blocks,
    may_match,
    parse_result,
    span_fields,
    text_blocks,
)
from spanjudge.recognition.skill_text import front_matter_name as front_matter_name
from spanjudge.recognition.skill_text import unwrap
from spanjudge.recognition.skill_tools import known_loader
from spanjudge.remembered import remembered_within
from spanjudge.spans.record import SpanRecord
from spanjudge.trajectory.effects import DEFAULT_EFFECT_MAP
from spanjudge.trajectory.steps import Step
from spanjudge.trajectory.toolnames import same_tool

if TYPE_CHECKING:
    from spanjudge.trajectory.steps import SkillStatus

# Argument names that say "this value is a skill's name" whatever the tool is called.
SKILL_ARGS = ("skill_name", "skill", "skill_id", "skillName", "skillId")
# Arguments whose presence means the call writes a file rather than reading it.
_WRITE_ARGS = frozenset({"content", "contents", "new_string", "old_string", "data", "patch"})
_SKILL_MD = re.compile(
    r"""((?:[^\s'"`;|&<>()]*[\\/])?([^\\/\s'"`;|&<>()]+)[\\/]SKILL\.md)(?![\w.])""", re.I
)
_SHELLS = frozenset({"bash", "sh", "zsh", "dash", "pwsh", "powershell", "cmd", "sudo", "env"})
# Shell commands that read a file (the first word of a pipeline segment).
_READERS = frozenset(
    {"cat", "sed", "head", "tail", "less", "more", "type", "bat", "awk", "nl", "view", "batcat"}
    | {"get-content", "gc", "open", "source", "."}
)
_ERROR_LEAD = re.compile(r"(?:error|exception|traceback)\b", re.I)
_GLOB = re.compile(r"[*?\[\]{}$]")
_SEGMENT = re.compile(r"\|\||&&|[;|\n]")
# What instrumentation writes for a value it hides (OpenInference's hide_outputs: __REDACTED__).
_HIDDEN_RESULT = "the result was hidden by the instrumentation"
# A load answered with nothing delivered no instructions (a later message may still bring them).
EMPTY_RESULT = "the load returned nothing"
_REDACTED = re.compile(
    r"^\s*(?:<?redacted>?|_+redacted_+|\*+|\[redacted\]|<REDACTED[^>]*>|null|none)\s*$", re.I
)
_REDACTED_WORDS = frozenset({"redacted", "redacted>", "null", "none"})


def _redacted(text: str) -> bool:
    """``_REDACTED.match(text)``, without the pattern for most texts: a placeholder starts,
    after blanks (`\\s` is what `str.strip` strips), with `<`, `_`, `*`, `[` or a word in
    `_REDACTED_WORDS` (ASCII letters with no other case-insensitive match)."""
    lead = text.lstrip()
    first = lead[:1]
    if first in ("r", "R", "n", "N"):
        whole = lead.rstrip()
        if whole.isascii():
            return whole.lower() in _REDACTED_WORDS
    elif not first or (first.isascii() and first not in ("<", "_", "*", "[")):
        return False
    return _REDACTED.match(text) is not None


# Error evidence in free text (shell output, tool errors rendered as text).
_EXIT_CODE = re.compile(
    r"(?:exit(?:ed)?(?: with)?(?: status| code)?|exit_code|returncode)[\"']?\s*[:=]?\s*(-?\d+)",
    re.I,
)
_SHELL_ERROR = re.compile(
    r"No such file or directory|cannot open|command not found|Permission denied", re.I
)
_VALIDATION = re.compile(
    r"validation error|invalid (?:tool )?arguments?|missing required (?:argument|parameter)"
    r"|field required|is a required property|unexpected keyword argument|invalid_request",
    re.I,
)
_PAYLOAD_ERROR = re.compile(
    r"""["']?(?:status|state)["']?\s*[:=]\s*["'](?:error|failed|failure)["']"""
    r"""|["']?(?:is_error|isError)["']?\s*[:=]\s*true""",
    re.I,
)
_ERROR_DETAIL = re.compile(r"""["'](?:error|message|detail)["']\s*:\s*["']([^"'\n]{1,300})""")
# A result whose first line denies the request ("403 Forbidden", "Access denied.", "I'm sorry,
# ...", "Skill x is disabled"); a heading line is a body's title, not a denial.
_DENIAL = re.compile(
    r"\A(?!#)[^\n]{0,80}?(?:\b(?:not permitted|not allowed|access(?: is)? denied|forbidden"
    r"|unauthori[sz]ed|disabled|timed out|unable to|I(?:'m| am) sorry|sorry"
    r"|I (?:cannot|can't|won't))\b)",
    re.I,
)
# A skill handed over as a titled document (pydantic-ai-harness: "# Skill: csv-report"), the
# title on one of the first lines, after any wrapper tags.
_SKILL_TITLE = re.compile(
    r"\A(?:[ \t]*<[^>\n]{1,80}>[ \t]*\n?){0,3}[ \t]*#{1,3}[ \t]*Skill:[ \t]*(\S+)[ \t]*$", re.M
)
_HEAD_CHARS = 500
# words one of which every shell failure above contains (checked before the regular expressions)
_SHELL_WORDS = ("exit", "returncode", "no such file", "cannot open", "not found", "denied")
_HINT_WORDS = ("valid", "missing", "required", "unexpected")
_VALIDATION_HINT = re.compile("|".join(_HINT_WORDS), re.I)
# the words `_PAYLOAD_ERROR` needs one of (lower-case)
_PAYLOAD_WORDS = ("status", "state", "is_error", "iserror")
_CHANGES = frozenset({"create", "modify", "delete"})
_DECODER = json.JSONDecoder()
_OK_STATUSES = frozenset({"success", "ok", "completed", "succeeded", "loaded"})
_BODY_KEYS = ("instructions", "body", "content", "text", "output", "stdout")
_SCALAR = re.compile(r"true|false|-?\d+(\.\d+)?")
# A description saying the tool loads a skill: a loading verb, then within a few words a skill,
# playbook or capability.
# A loader's description: it loads, fetches or reads a skill's or playbook's instructions or
# procedure ("Load a skill's instructions by name", "Fetch the playbook for a topic"), or loads
# or activates a capability ("Load a listed capability"). Getting a thing's capabilities ("Get
# the device's capabilities") is reading data, not loading instructions.
_LOADER_DESCRIPTION = re.compile(
    r"\b(?:load|activate|fetch|retrieve|open|get|read)s?\b(?:\W+\w+){0,3}?\W+"
    r"(?:skill|playbook|procedure)"
    r"|\b(?:load|activate)s?\b(?:\W+\w+){0,3}?\W+capabilit(?:y|ies)",
    re.I,
)
# A numbered or bulleted step of a skill's instructions.
_STEP_LINE = re.compile(r"(?:\d{1,2}[.)]|[-*])\s+\S")
_SKILL_LIKE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,79}")


def tool_step(
    span: SpanRecord,
    preset: str,
    *,
    tool: str,
    arguments: Any = None,
    result: Any = None,
    result_text: str | None = None,
    has_result: bool = False,
    failure: str | None = None,
    tool_status: str | None = None,
    error_type: str | None = None,
    declared_skill: str | None = None,
    call_id: str | None = None,
    agent_name: str | None = None,
    tool_schemas: Mapping[str, Any] | None = None,
    description: str | None = None,
) -> Step:
    """The step for one executed tool call, ``span`` as ``preset`` read it: a `tool_call`, or a
    `skill_load` with its status. A preset says only where its framework keeps each fact; the
    evidence rules here decide the rest.

    - ``result``: the decoded payload (mapping, list or text); ``result_text``: the result as
      shown in reports (derived from ``result`` when None); ``has_result``: one was recorded;
    - ``failure``: why the span has error status (`span_error`); ``tool_status``: a status the
      instrumentation records (`gen_ai.tool.status`); ``error_type``: `error.type` on a span
      whose status is not error;
    - ``declared_skill``: a skill the instrumentation names (`gen_ai.skill.name`);
    - ``description``: the tool's own description, as the model was given it.
    """
    text = result_text
    if text is None and has_result:
        text = as_text(result)
    if isinstance(result, str):  # read once, for the error and the load rules alike
        result = parse_result(result)
    error = failure or (error_type and f"error.type {error_type}")
    if error is None and tool_status and tool_status.lower() not in _OK_STATUSES:
        error = text or f"tool status {tool_status!r}"
    if error is None and has_result:
        error = payload_error(result, text, tool=tool, arguments=arguments)
    # a load's own fields (its error among them), or the call's error
    load = _load_of(
        tool,
        arguments,
        result,
        text,
        error,
        span.status,
        has_result=has_result,
        declared=declared_skill,
        description=description,
    )
    return Step(
        kind="tool_call" if load is None else "skill_load",
        name=tool,
        tool_call_id=call_id,
        arguments=arguments,
        result=text,
        agent_name=agent_name,
        tool_schemas={} if tool_schemas is None else tool_schemas,
        # kept for the rules that decide the call again once its content is found elsewhere
        tool_descriptions={tool: description} if description else {},
        **span_fields(span, preset),
        **({"error": error} if load is None else load),
    )


def _load_of(
    tool: str,
    arguments: Any,
    result: Any,
    text: str | None,
    error: str | None,
    status: str,
    *,
    has_result: bool,
    declared: str | None,
    description: str | None,
) -> dict[str, Any] | None:
    """The load fields (`_load_fields`) of a call of ``tool`` (`tool_step`'s facts) with
    ``text``, ``error`` and span ``status`` that the evidence reads as a skill load, or None
    for a plain tool call (the step is then built once, as one or the other)."""
    skill = declared or skill_of_call(tool, arguments)
    described = None
    if skill is None and describes_loader(description):
        described = skill = named_argument(arguments)  # what it was asked to load
    if skill is None and not _may_hold_skill_md(text):
        return None
    if isinstance(result, Mapping) and (outputs := envelope_outputs(result, tool, arguments)):
        # the loader's own answer, not the record around it: its one output (outputs that say
        # the same, as a text and the value it was printed from, are one), or the one that
        # holds a SKILL.md; where several say nothing of one, the record stays whole
        answers: list[tuple[Any, str | None]] = []
        for output in outputs:
            value = parse_result(output) if isinstance(output, str) else output
            if all(value != known for known, _ in answers):
                answers.append((value, output if isinstance(output, str) else as_text(output)))
        if len(answers) > 1:
            answers = [(value, said) for value, said in answers if _skill_text(value, said)][:1]
        if answers:
            result, text = answers[0]
    body = body_of(result, text)
    if error is None and declared is None and _metadata_only(arguments, result, body, text):
        return None  # stat/exists on a SKILL.md path: never read
    # the body says what was loaded: over a loader nobody named (or named with no usable
    # argument, ""), and over a path's folder name
    named = front_matter_name(body)
    if named and not declared and skill in (None, "", skill_md_read(arguments)):
        skill = named
    if skill is None:
        return None
    load_status, reason = _load_status(
        status,
        error,
        text,
        skill,
        has_result=has_result or error is not None,
        body=body,
    )
    if (
        skill == described
        and load_status == "loaded"
        and named is None
        and not reads_as_instructions(body)
    ):
        return None  # the description alone: no skill's text
    return _load_fields(error, skill, body, load_status, reason)


def _skill_text(result: Any, text: str | None) -> bool:
    """Whether a result carries a SKILL.md (front matter) or text that reads as instructions."""
    body = body_of(result, text)
    return front_matter_name(body) is not None or reads_as_instructions(body)


def reads_as_instructions(text: str | None) -> bool:
    """A result that reads as a skill's instructions: several lines of markdown with a
    heading, or with numbered or bulleted steps."""
    return _reads_as_instructions(text or "")


@remembered_within()  # a result is read by the call's rule and the session's rules
def _reads_as_instructions(text: str) -> bool:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) < 3:
        return False
    heading = lines[0].startswith("#")
    steps = sum(1 for line in lines if _STEP_LINE.match(line))
    return heading or steps >= 2


def describes_loader(description: str | None) -> bool:
    """The tool's own description says it loads a skill ("Activate a skill to load its
    instructions", "Load a skill's instructions by name", "Fetch the playbook for a topic")."""
    return bool(description) and _loader_description(description or "")


@remembered_within()  # every call of a tool carries the same description
def _loader_description(description: str) -> bool:
    return _LOADER_DESCRIPTION.search(description) is not None


def named_argument(arguments: Any) -> str | None:
    """The one name-like string a call was given (the whole argument, or its only string
    value): what a described loader was asked to load, known skill or not."""
    if isinstance(arguments, Mapping):
        values = [v for v in arguments.values() if isinstance(v, str)]
        arguments = values[0] if len(values) == 1 else None
    if isinstance(arguments, str) and _SKILL_LIKE.fullmatch(arguments.strip()):
        return arguments.strip()
    return None


def _metadata_only(arguments: Any, result: Any, body: str | None, text: str | None) -> bool:
    """Named by its SKILL.md path alone, answered with no text: `true`, `412`, `{"size": 412}`."""
    if skill_md_read(arguments) is None or front_matter_name(body) is not None:
        return False
    if _SCALAR.fullmatch((text or "").strip()) or isinstance(result, bool | int | float):
        return True
    keys = result if isinstance(result, Mapping) else ("status",)
    return (
        "status" not in keys
        and not any(k in keys for k in _BODY_KEYS)
        and not shell_failure(text or "")
    )


def _may_hold_skill_md(text: str | None) -> bool:
    """Cheap test before any parsing: SKILL.md front matter opens with `---` and has `name:`."""
    return bool(text) and "---" in (text or "")[:600] and "name:" in (text or "")[:4000]


def as_skill_load(step: Step, skill: str, body: str | None, *, has_result: bool) -> Step:
    """Re-read a tool step as a load of ``skill``; its status comes from the evidence."""
    status, reason = load_status(step, skill, has_result=has_result, body=body)
    return replace(step, kind="skill_load", **_load_fields(step.error, skill, body, status, reason))


def _load_fields(
    error: str | None, skill: str, body: str | None, status: SkillStatus, reason: str | None
) -> dict[str, Any]:
    """What a load of ``skill`` with ``status`` says beyond the tool step it was."""
    return {
        "skill": skill.strip(),
        "skill_status": status,
        "skill_body": body if status == "loaded" else None,
        "skill_body_source": "trace" if status == "loaded" and body else None,
        "error": error or reason,  # an unresolved load may say why (a hidden result)
    }


def load_status(
    step: Step, skill: str, *, has_result: bool, body: str | None = None
) -> tuple[SkillStatus, str | None]:
    """`loaded` only with a result, a usable skill name and no error evidence of any kind (but
    a shell read that failed on another file, `cat a/SKILL.md b/SKILL.md` without b, printed a)."""
    return _load_status(
        step.status, step.error, step.result, skill, has_result=has_result, body=body
    )


def _load_status(
    status: str,
    error: str | None,
    result: str | None,
    skill: str,
    *,
    has_result: bool,
    body: str | None,
) -> tuple[SkillStatus, str | None]:
    """`load_status` of a tool step with ``status``, ``error`` and ``result``."""
    if (status == "error" or error) and _printed_anyway(error, result, skill, body):
        return "loaded", None
    if status == "error":
        return "failed", error or "span status is error"
    if error:
        return "failed", error
    if not skill.strip() or _redacted(skill):
        return "unresolved", None
    if not has_result:
        return "unresolved", None
    text = result or ""
    if body is None and _may_hold_skill_md(text):
        body = body_of(None, text)
    if front_matter_name(body) is not None:
        return "loaded", None  # the SKILL.md itself came back: its text may say anything
    # Refusals, shell failures and validation errors lead the result; a body quoting such
    # words further down is not one.
    head = text.lstrip()[:_HEAD_CHARS]
    lead = (body or text).lstrip()
    if _redacted(lead):  # no evidence either way
        return "unresolved", f"{_HIDDEN_RESULT}: {lead.strip()[:40]}"
    if not lead:
        return "failed", EMPTY_RESULT
    if _ERROR_LEAD.match(lead):  # "Error: ...", "Error executing tool load_skill"
        return "failed", f"error in result: {lead[:200]}"
    if is_refusal(head) or _DENIAL.match(lead):
        return "failed", f"refusal in result: {text.strip()[:200]}"
    payload = _PAYLOAD_ERROR.search(head) if may_match(head, _PAYLOAD_WORDS) else None
    if payload is not None:  # with text around it
        detail = _ERROR_DETAIL.search(head, payload.start())
        return "failed", f"error in result: {detail.group(1) if detail else payload.group(0)}"
    if (shell := shell_failure(head)) is not None:
        return "failed", shell
    if may_match(head, _HINT_WORDS) and _VALIDATION_HINT.search(head) and _VALIDATION.search(head):
        return "failed", f"argument validation error: {text.strip()[:200]}"
    return "loaded", None


def _printed_anyway(error: str | None, result: str | None, skill: str, body: str | None) -> bool:
    named = front_matter_name(body or body_of(None, result or ""))
    failure = shell_failure(f"{error or ''}\n{(result or '')[-_HEAD_CHARS:]}")
    return named is not None and named.casefold() == skill.strip().casefold() and bool(failure)


def payload_error(
    result: Any, text: str | None, *, tool: str | None = None, arguments: Any = None
) -> str | None:
    """An error inside a result whose span said OK, structured or with text around it
    (`{"status": "error", ...}` followed by a line of prose is still an error), or, where the
    result wraps the output of a call of ``tool`` with ``arguments`` (`envelope_outputs`),
    inside that output."""
    found = _payload_error(result, text)
    if found is None and isinstance(result, dict):
        # a tool's content as text blocks beside the record's own fields (MCP's result, a
        # framework's tool response): an error in the content is the call's, whatever a
        # success flag beside it says of the tool having run
        joined = joined_text_blocks(result.get("content"))
        if joined is not None:
            found = _payload_error(parse_result(joined), joined)
    if found is None and tool is not None and isinstance(result, dict):  # (decoded JSON)
        for inner in envelope_outputs(result, tool, arguments):
            found = _payload_error(inner, inner if isinstance(inner, str) else None)
            if found is not None:
                break
    return found


def _payload_error(result: Any, text: str | None) -> str | None:
    if isinstance(result, (dict, list)):
        found = error_in_payload(result)
        if found or not text:
            return found
        start = text.lstrip()
        if start[:1] != "{":
            return None
    else:  # the text is the payload: only an object can hold an error
        start = text.lstrip() if text else ""
        if start[:1] != "{":
            return None
        found = error_in_payload(text)
        if found:
            return found
    try:
        leading, _ = _DECODER.raw_decode(start)
    except (ValueError, RecursionError):  # not JSON, or nested too deep to read
        return None
    return error_in_payload(leading) if isinstance(leading, dict) else None


def envelope_outputs(result: Mapping[str, Any], tool: str, arguments: Any) -> list[Any]:
    """The tool's own output where ``result`` wraps it with the call's record: an object that
    holds the call's name (``tool``, namespaced or not) and its input (``arguments``, or an
    object holding them, as `{"args": [], "kwargs": {...}}`: `_holds`) beside further fields,
    which are the output (as it is, or as text blocks `[{"text": ...}]`, each text an output).
    A flag beside them (`"is_error": false`) says only that the tool did not raise, and is no
    output; a result that holds no such name and input is no envelope (`[]`)."""
    if arguments is None:
        return []
    named = given = False
    rest: list[Any] = []
    for value in result.values():
        if not named and isinstance(value, str) and same_tool(tool, value):
            named = True
        elif not given and isinstance(value, Mapping) and _holds(value, arguments):
            given = True
        elif value is not None and not isinstance(value, bool):
            rest.append(value)
    if not (named and given):
        return []
    outputs: list[Any] = []
    for value in rest:
        texts = text_blocks(value)
        if texts is not None:
            outputs.extend(texts)
        else:
            outputs.append(value)
    return outputs


def _holds(record: Any, arguments: Any, depth: int = 2) -> bool:
    """``record`` is ``arguments``, or holds them within two levels of objects (a call record
    `{"args": [], "kwargs": {"input": {...}, "options": null}}` around a tool's own arguments)."""
    if record == arguments:
        return True
    return (
        depth > 0
        and isinstance(record, Mapping)
        and any(_holds(inner, arguments, depth - 1) for inner in record.values())
    )


def shell_failure(text: str) -> str | None:
    """A shell command's failure in its output: a non-zero exit code or a missing file."""
    lowered = text.lower()
    if not any(word in lowered for word in _SHELL_WORDS):
        return None
    code = _EXIT_CODE.search(text)
    if code is not None and code.group(1) != "0":
        return f"exit code {code.group(1)}"
    if code is None and (match := _SHELL_ERROR.search(text)) is not None:
        return match.group(0)
    return None


# --------------------------------------------------------------------------- which skill


def skill_of_call(tool: str, arguments: Any) -> str | None:
    """The skill a call loads by its arguments, or None.

    "" means a load attempt without a usable name (a known loader called with no skill).
    """
    path = skill_md_read(arguments)
    if path is not None and DEFAULT_EFFECT_MAP.effect(tool) not in _CHANGES:
        return path  # (writing or deleting a SKILL.md loads nothing)
    args = arguments if isinstance(arguments, (dict, Mapping)) else {}  # (no ABC check: dict)
    if not args.keys().isdisjoint(SKILL_ARGS):  # (most calls: one look at the keys)
        for key in SKILL_ARGS:
            value = args.get(key)
            if isinstance(value, str):
                return value.strip()
    keys = known_loader(tool)
    if keys is None:
        return None
    for key in keys:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    if isinstance(arguments, str) and arguments.strip() and tool != "Skill":
        return arguments.strip()
    return ""


def skill_md_read(arguments: Any) -> str | None:
    """The skill whose SKILL.md a call reads: a path argument, or a reading shell command."""
    candidates = _md_strings(arguments)
    if not candidates or (isinstance(arguments, Mapping) and _WRITE_ARGS.intersection(arguments)):
        return None
    for value in candidates:
        if "skill.md" not in value.lower():
            continue
        stripped = value.strip()
        if not any(c.isspace() for c in stripped):
            match = _SKILL_MD.fullmatch(stripped)
            if match is not None and not _GLOB.search(match.group(2)):
                return match.group(2)
            continue
        for segment in _SEGMENT.split(stripped.replace('"', " ").replace("'", " ")):
            words = segment.split()
            while words and (
                words[0].rsplit("/", 1)[-1] in _SHELLS or words[0][:1] == "-" or "=" in words[0]
            ):
                words = words[1:]
            if not words or words[0].rsplit("/", 1)[-1].lower() not in _READERS:
                continue
            if any(w == "-i" or w.startswith(("-i.", "--in-place")) for w in words[1:]):
                continue  # sed -i edits the file in place
            rest = " ".join(words[1:])
            match = _SKILL_MD.search(rest)
            # `cat > x/SKILL.md` writes it; `cat x/*/SKILL.md` reads no one skill
            if (
                match is not None
                and not rest[: match.start()].rstrip().endswith(">")
                and not _GLOB.search(match.group(2))
            ):
                return match.group(2)
    return None


def _md_strings(value: Any) -> list[str]:
    """Every string in ``value`` (nested up to 4 deep) that may name a `.md` file, in the
    order the arguments hold them."""
    found: list[str] = []
    _add_md_strings(value, 0, found)
    return found


def _add_md_strings(item: Any, depth: int, found: list[str]) -> None:
    if isinstance(item, str):
        if ".md" in item or ".MD" in item:
            found.append(item)
        return
    if depth >= 4:
        return
    inners: Iterable[Any]
    if isinstance(item, (dict, Mapping)):  # (a dict first: no ABC check for it)
        inners = item.values()
    elif isinstance(item, (list, tuple)):
        inners = item
    else:
        return
    for inner in inners:
        if isinstance(inner, str):  # (most values: read here, not one call each)
            if ".md" in inner or ".MD" in inner:
                found.append(inner)
        else:
            _add_md_strings(inner, depth + 1, found)


# --------------------------------------------------------------------------- skill bodies


def body_of(result: Any, text: str | None) -> str | None:
    """The SKILL.md text a result carries, without the wrapping harnesses add around it."""
    if isinstance(result, Mapping):
        for key in _BODY_KEYS:
            value = result.get(key)
            if isinstance(value, str) and value.strip():
                return unwrap(value)
            joined = joined_text_blocks(value)  # the text blocks of a tool's content
            if joined is not None and joined.strip():
                return unwrap(joined)
        return None
    if text is None:
        return None
    return unwrap(text)


def bodies_in(texts: Iterable[str | None]) -> tuple[tuple[str, str], ...]:
    """(skill name, body) of every SKILL.md document among message texts (a loader nobody
    named may hand the body over as a later message)."""
    found = []
    for text in texts:
        if text and "name:" in text and (name := front_matter_name(text)) is not None:
            found.append((name, text))
        elif text and "Skill:" in text and (title := _SKILL_TITLE.match(text)) is not None:
            found.append((title.group(1), text))
    return tuple(found)
