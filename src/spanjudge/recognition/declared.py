"""User-declared conventions: teach spanjudge a framework's spans without writing code.

```yaml
conventions:
  haystack:
    session_key: session.id
    turn:
      span_name: haystack.agent.run
      request: "haystack.agent.input#messages[role=user][-1].content[*].text"
      answer: "haystack.agent.output#last_message.content[*].text"
    model_call:
      span_name: haystack.agent.step.llm
      input_tokens: "haystack.agent.step.llm.output#replies[*].meta.usage.prompt_tokens"
    tool_call:
      span_name: haystack.agent.step.tool
      tool_name: haystack.tool.name
      arguments: haystack.agent.step.tool.input
      result: haystack.agent.step.tool.output
      error: haystack.tool.error
```

A field names an attribute, optionally followed by `#` and a path into its JSON value: keys
separated by dots, `[N]` (negative counts from the end), `[*]` (every item) and `[key=value]`
(the items whose key has that value). Spans are matched by `span_name` (a name, a `*` pattern
or a list of them) and/or `attributes` (attribute -> required value, or `true` for present).
Which spans are skill loads and whether they succeeded is decided by the shared evidence
rules, as for every built-in preset.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from spanjudge.errors import did_you_mean
from spanjudge.recognition.base import as_text, count_of, parse_json, span_error, span_fields
from spanjudge.recognition.catalogue import parse_catalogue
from spanjudge.recognition.evidence import tool_step
from spanjudge.spans.record import SpanRecord
from spanjudge.trajectory.steps import Step, ToolRequest

# role -> the fields it may declare (besides span_name / attributes)
ROLE_FIELDS: Mapping[str, tuple[str, ...]] = {
    "turn": ("request", "answer", "agent_name"),
    "model_call": (
        "model",
        "input_tokens",
        "output_tokens",
        "text",
        "finish_reason",
        "tool_calls",
        "catalogue",
    ),
    "tool_call": ("tool_name", "arguments", "result", "error", "call_id", "catalogue"),
}
MATCH_KEYS = ("span_name", "attributes")
TOP_KEYS = ("session_key", "claims", *ROLE_FIELDS)
_SEGMENT = re.compile(r"([^.\[\]]+)|\[(\*|-?\d+|[^=\]]+=[^\]]*)\]|(\.)")


@dataclass(frozen=True, slots=True, kw_only=True)
class FieldRef:
    """`attribute#path`: where one fact lives."""

    attribute: str
    path: tuple[str, ...] = ()

    def values(self, span: SpanRecord) -> list[Any]:
        raw = span.attributes.get(self.attribute)
        if raw is None:
            return []
        if not self.path:
            return [raw]
        found: list[Any] = [parse_json(raw)]
        for step in self.path:
            found = [v for item in found for v in _step(item, step)]
        return [v for v in found if v is not None]


def _step(item: Any, step: str) -> list[Any]:
    if step == "[*]":
        return list(item) if isinstance(item, (list, tuple)) else []
    if step.startswith("[") and "=" in step:
        key, _, want = step[1:-1].partition("=")
        if isinstance(item, (list, tuple)):  # still a list: [-1] or [*] may follow
            return [[i for i in item if isinstance(i, Mapping) and str(i.get(key)) == want]]
        return []
    if step.startswith("["):
        index = int(step[1:-1])
        if isinstance(item, (list, tuple)) and -len(item) <= index < len(item):
            return [item[index]]
        return []
    if isinstance(item, Mapping) and step in item:
        return [item[step]]
    return []


def parse_field(text: str) -> FieldRef:
    """`attr.name#a.b[-1][*].c` -> FieldRef; ValueError with the fault on bad syntax."""
    attribute, _, path = text.partition("#")
    if not attribute.strip():
        raise ValueError("no attribute name before '#'")
    steps: list[str] = []
    pos = 0
    while pos < len(path):
        match = _SEGMENT.match(path, pos)
        if match is None or match.end() == pos:
            raise ValueError(f"cannot read the path at {path[pos:]!r} (keys, [N], [*], [k=v])")
        if match.group(1):
            steps.append(match.group(1))
        elif match.group(2):
            steps.append(f"[{match.group(2)}]")
        pos = match.end()
    return FieldRef(attribute=attribute.strip(), path=tuple(steps))


@dataclass(frozen=True, slots=True, kw_only=True)
class Role:
    """Which spans play a role (a turn, a model call, a tool call) and where their facts are."""

    names: tuple[str, ...] = ()
    attributes: Mapping[str, Any] = field(default_factory=dict)
    fields: Mapping[str, FieldRef] = field(default_factory=dict)

    def matches(self, span: SpanRecord) -> bool:
        if self.names and not any(
            span.name == n or ("*" in n and fnmatch.fnmatchcase(span.name, n)) for n in self.names
        ):
            return False
        for key, want in self.attributes.items():
            value = span.attributes.get(key)
            if value is None or (want is not True and str(value) != str(want)):
                return False
        return True

    def all(self, span: SpanRecord, name: str) -> list[Any]:
        ref = self.fields.get(name)
        return ref.values(span) if ref is not None else []

    def text(self, span: SpanRecord, name: str) -> str | None:
        texts = [t for t in (as_text(v) for v in self.all(span, name)) if t and t.strip()]
        return "\n".join(texts).strip() if texts else None

    def number(self, span: SpanRecord, name: str) -> int | None:
        found = [n for n in map(count_of, self.all(span, name)) if n is not None]
        return sum(found) if found else None


@dataclass(frozen=True, slots=True, kw_only=True)
class DeclaredRecogniser:
    """A recogniser built from a `conventions:` entry of the configuration."""

    name: str
    roles: Mapping[str, Role]
    claims: tuple[str, ...] = ()  # span-name patterns claimed even when no role matches
    session_key: str | None = None

    def recognise(self, span: SpanRecord) -> list[Step] | None:
        for role, spec in self.roles.items():
            if spec.matches(span):
                if role == "turn":
                    return self._turn(span, spec)
                if role == "model_call":
                    return [self._model(span, spec)]
                return [self._tool(span, spec)]
        if any(fnmatch.fnmatchcase(span.name, pattern) for pattern in self.claims):
            return []
        return None

    def _turn(self, span: SpanRecord, spec: Role) -> list[Step]:
        base = span_fields(span, self.name)
        agent = spec.text(span, "agent_name")
        steps = [
            Step(
                kind="agent_turn",
                name=span.name,
                text=spec.text(span, "request"),
                agent_name=agent,
                error=span_error(span),
                **base,
            )
        ]
        answer = spec.text(span, "answer")
        if answer:
            steps.append(
                Step(
                    kind="final_answer",
                    name=span.name,
                    text=answer,
                    seq=1,
                    agent_name=agent,
                    **base,
                )
            )
        return steps

    def _model(self, span: SpanRecord, spec: Role) -> Step:
        requests = tuple(
            ToolRequest(
                name=str(c.get("tool_name") or c.get("name") or ""),
                call_id=str(c["id"]) if c.get("id") else None,
                arguments=c.get("arguments"),
            )
            for c in spec.all(span, "tool_calls")
            if isinstance(c, Mapping)
        )
        return Step(
            kind="model_call",
            name=spec.text(span, "model") or span.name,
            model=spec.text(span, "model"),
            input_tokens=spec.number(span, "input_tokens"),
            output_tokens=spec.number(span, "output_tokens"),
            text=spec.text(span, "text"),
            finish_reason=spec.text(span, "finish_reason"),
            tool_requests=requests,
            catalogue=parse_catalogue(spec.text(span, "catalogue")),
            error=span_error(span),
            **span_fields(span, self.name),
        )

    def _tool(self, span: SpanRecord, spec: Role) -> Step:
        results = spec.all(span, "result")
        result = parse_json(results[0]) if results else None
        failure = span_error(span)
        flags = spec.all(span, "error")
        if failure is None and any(f not in (False, "false", "False", 0, "", None) for f in flags):
            detail = result.get("error") if isinstance(result, Mapping) else None
            failure = as_text(detail) or f"{spec.fields['error'].attribute} is set"
        arguments = spec.all(span, "arguments")
        step = tool_step(
            span,
            self.name,
            tool=spec.text(span, "tool_name") or span.name,
            arguments=parse_json(arguments[0]) if arguments else None,
            result=result,
            has_result=bool(results),
            failure=failure,
            call_id=spec.text(span, "call_id"),
        )
        catalogue = parse_catalogue(spec.text(span, "catalogue"))
        return step if not catalogue else _with_catalogue(step, catalogue)


def _with_catalogue(step: Step, catalogue: Any) -> Step:
    from dataclasses import replace

    return replace(step, catalogue=catalogue)


def parse_conventions(raw: Any, path: str, problems: list[str]) -> tuple[DeclaredRecogniser, ...]:
    """The `conventions` section: name -> declaration; every problem goes to ``problems``."""
    if raw is None:
        return ()
    if not isinstance(raw, Mapping):
        problems.append(f"{path}: expected a mapping of convention name -> declaration")
        return ()
    out = []
    for name, spec in raw.items():
        where = f"{path}.{name}"
        if not isinstance(spec, Mapping):
            problems.append(f"{where}: expected a mapping with turn, model_call and/or tool_call")
            continue
        declared = _declaration(str(name), spec, where, problems)
        if declared is not None:
            out.append(declared)
    return tuple(out)


def _declaration(
    name: str, spec: Mapping[str, Any], where: str, problems: list[str]
) -> DeclaredRecogniser | None:
    before = len(problems)
    for key in spec:
        if key not in TOP_KEYS:
            hint = did_you_mean(str(key), TOP_KEYS)
            problems.append(
                f"{where}.{key}: unknown setting{hint} (allowed: {', '.join(TOP_KEYS)})"
            )
    roles = {
        role: parsed
        for role in ROLE_FIELDS
        if role in spec and (parsed := _role(role, spec[role], f"{where}.{role}", problems))
    }
    if not any(role in spec for role in ROLE_FIELDS):
        problems.append(f"{where}: declares no role (give turn, model_call and/or tool_call)")
    session_key = spec.get("session_key")
    if session_key is not None and not (isinstance(session_key, str) and session_key):
        problems.append(f"{where}.session_key: expected an attribute name, got {session_key!r}")
    claims = _names(spec.get("claims"), f"{where}.claims", problems)
    if len(problems) > before:
        return None
    return DeclaredRecogniser(name=name, roles=roles, claims=claims, session_key=session_key)


def _role(role: str, spec: Any, where: str, problems: list[str]) -> Role | None:
    if not isinstance(spec, Mapping):
        problems.append(f"{where}: expected a mapping with span_name and the fields")
        return None
    allowed = (*MATCH_KEYS, *ROLE_FIELDS[role])
    fields: dict[str, FieldRef] = {}
    for key, value in spec.items():
        if key in MATCH_KEYS:
            continue
        if key not in ROLE_FIELDS[role]:
            hint = did_you_mean(str(key), allowed)
            problems.append(f"{where}.{key}: unknown field{hint} (allowed: {', '.join(allowed)})")
        elif not isinstance(value, str) or not value.strip():
            problems.append(
                f"{where}.{key}: expected 'attribute' or 'attribute#path', got {value!r}"
            )
        else:
            try:
                fields[key] = parse_field(value)
            except ValueError as exc:
                problems.append(f"{where}.{key}: {exc}")
    names = _names(spec.get("span_name"), f"{where}.span_name", problems)
    attributes = spec.get("attributes") or {}
    if not isinstance(attributes, Mapping):
        problems.append(f"{where}.attributes: expected a mapping of attribute -> value (or true)")
        attributes = {}
    if not names and not attributes:
        problems.append(f"{where}: say which spans these are (span_name and/or attributes)")
    if role == "tool_call" and "tool_name" not in fields:
        problems.append(f"{where}.tool_name: required (the attribute holding the tool's name)")
    return Role(names=names, attributes=dict(attributes), fields=fields)


def _names(value: Any, where: str, problems: list[str]) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str) and value:
        return (value,)
    if isinstance(value, Sequence) and value and all(isinstance(v, str) and v for v in value):
        return tuple(value)
    problems.append(f"{where}: expected a span name or a list of them, got {value!r}")
    return ()


def session_keys(conventions: Sequence[DeclaredRecogniser]) -> tuple[str, ...]:
    """The session-key attributes the declared conventions name, for the session store."""
    return tuple(dict.fromkeys(c.session_key for c in conventions if c.session_key))
