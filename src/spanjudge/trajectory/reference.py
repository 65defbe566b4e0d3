"""A reference trajectory: the tool calls a session is expected to make (an expectation's
``trajectory:``), compared with the recorded ones by the `trajectory_match` evaluator::

    trajectory:
      match: in_order                 # exact (the default) | in_order | any_order
      tools:
        - read_csv                    # a tool call, by name (namespaces allowed, toolnames.py)
        - {skill: csv-report}         # a skill load of csv-report, whichever tool loaded it
        - {tool: write_file, arguments: {path: out/report.md}}
      arguments:                      # per tool: a subset every listed call's arguments hold
        read_csv: {path: data/sales.csv}

An entry's own ``arguments`` replace the per-tool ones for that entry.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

MatchMode = Literal["exact", "in_order", "any_order"]
MATCH_MODES: tuple[MatchMode, ...] = get_args(MatchMode)
TRAJECTORY_KEYS = ("tools", "match", "arguments")
_ENTRY_KEYS = ("tool", "skill", "arguments")
# A longer reference is a log, not an expectation; the limit bounds matching's work and depth.
MAX_CALLS = 500


@dataclass(frozen=True, slots=True, kw_only=True)
class ReferenceCall:
    """One expected call: a tool by name, or a skill load by the skill's name."""

    tool: str | None = None
    skill: str | None = None
    # argument name -> expected value (a subset of the call's arguments); empty: any arguments
    arguments: Mapping[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        name = f"skill {self.skill}" if self.skill is not None else str(self.tool)
        if not self.arguments:
            return name
        shown = ", ".join(f"{k}={v!r}" for k, v in self.arguments.items())
        return f"{name}({shown})"


@dataclass(frozen=True, slots=True, kw_only=True)
class ReferenceTrajectory:
    calls: tuple[ReferenceCall, ...]
    match: MatchMode = "exact"


def _arguments(value: Any, path: str, problems: list[str]) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        problems.append(f"{path}: expected a mapping of argument name -> expected value")
        return {}
    return dict(value)


def _entry(
    item: Any, per_tool: Mapping[str, Mapping[str, Any]], path: str, problems: list[str]
) -> ReferenceCall | None:
    if isinstance(item, str) and item.strip():
        return ReferenceCall(tool=item, arguments=per_tool.get(item, {}))
    if not isinstance(item, Mapping):
        problems.append(
            f"{path}: expected a tool name, {{tool: name, arguments: {{...}}}} or {{skill: name}}"
        )
        return None
    for key in item:
        if key not in _ENTRY_KEYS:
            problems.append(f"{path}.{key}: unknown key (allowed: {', '.join(_ENTRY_KEYS)})")
    tool, skill = item.get("tool"), item.get("skill")
    if (tool is None) == (skill is None):
        problems.append(f"{path}: give exactly one of tool or skill")
        return None
    name = tool if tool is not None else skill
    if not isinstance(name, str) or not name.strip():
        problems.append(f"{path}.{'tool' if tool is not None else 'skill'}: expected a name")
        return None
    if skill is not None:
        if "arguments" in item:
            problems.append(f"{path}.arguments: a skill load is matched by its skill only")
        return ReferenceCall(skill=name)
    if "arguments" in item:
        args = _arguments(item["arguments"], f"{path}.arguments", problems)
    else:
        args = per_tool.get(name, {})
    return ReferenceCall(tool=name, arguments=args)


def parse_reference(raw: Any, path: str, problems: list[str]) -> ReferenceTrajectory | None:
    """Validate an expectation's ``trajectory:``; every problem goes to ``problems``."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        problems.append(f"{path}: expected {{tools: [...], match: exact|in_order|any_order}}")
        return None
    for key in raw:
        if key not in TRAJECTORY_KEYS:
            problems.append(f"{path}.{key}: unknown key (allowed: {', '.join(TRAJECTORY_KEYS)})")
    match = raw.get("match", "exact")
    if match not in MATCH_MODES:
        problems.append(f"{path}.match: expected one of {', '.join(MATCH_MODES)}, got {match!r}")
        match = "exact"
    per_tool: dict[str, Mapping[str, Any]] = {}
    raw_args = raw.get("arguments")
    if raw_args is not None and not isinstance(raw_args, Mapping):
        problems.append(f"{path}.arguments: expected a mapping of tool name -> {{argument: value}}")
    elif raw_args is not None:
        for tool, args in raw_args.items():
            per_tool[str(tool)] = _arguments(args, f"{path}.arguments.{tool}", problems)
    tools = raw.get("tools")
    if not isinstance(tools, list):
        problems.append(f"{path}.tools: required, a list of tool names or {{skill: name}}")
        return None
    if len(tools) > MAX_CALLS:
        problems.append(f"{path}.tools: at most {MAX_CALLS} calls, got {len(tools)}")
        tools = tools[:MAX_CALLS]
    calls = [_entry(item, per_tool, f"{path}.tools[{i}]", problems) for i, item in enumerate(tools)]
    if not tools and match != "exact":
        problems.append(
            f"{path}.tools: an empty list always holds with match {match}"
            " (use match: exact to require no tool calls)"
        )
    listed = {c.tool for c in calls if c is not None and c.tool is not None}
    for tool in per_tool:
        if tool not in listed:
            problems.append(f"{path}.arguments.{tool}: {tool} is not in tools")
    return ReferenceTrajectory(calls=tuple(c for c in calls if c is not None), match=match)
