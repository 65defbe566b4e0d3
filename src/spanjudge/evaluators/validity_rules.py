"""Constraint options of `trajectory_validity`: argument rules (glob / regex), ordering pairs,
step limits and explicit schemas, parsed with every problem reported at its config path."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from spanjudge.patterns import PatternError, UserPattern, compile_user_pattern


def _installed(name: str) -> bool:
    """Whether top-level module ``name`` can be imported: `importlib.util.find_spec` asks
    `sys.meta_path`'s finders the same way, but importing importlib.util costs 2% of a small
    eval."""
    if name in sys.modules:
        return sys.modules[name] is not None
    return any(
        finder.find_spec(name, None) is not None
        for finder in sys.meta_path
        if hasattr(finder, "find_spec")
    )


@lru_cache(maxsize=1)
def validator() -> str:
    """Which validator checks schemas: "jsonschema" when it is installed, else "builtin". Found
    without importing it (jsonschema costs ~100 ms of start-up, and most runs check no schema),
    once, and here rather than in `validity_schema`, which a run without schemas never imports
    though its verdicts name the validator."""
    return "jsonschema" if _installed("jsonschema") else "builtin"


RULE_KINDS = ("glob", "regex", "not_glob", "not_regex")


def glob_to_regex(pattern: str) -> re.Pattern[str]:
    """Path glob: `**` any depth (``a/**`` matches ``a/b/c``), `*`/`?` within one segment."""
    out = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z", re.DOTALL)


def norm_value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    text = text.strip()
    while text.startswith("./"):
        text = text[2:]
    return text


def _str_list(raw: Any, path: str, problems: list[str]) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(v, str) and v for v in raw):
        problems.append(f"{path}: expected a list of tool names or globs, e.g. [read_csv, 'get_*']")
        return ()
    return tuple(raw)


def _limit(raw: Any, path: str, problems: list[str]) -> int | None:
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
        problems.append(f"{path}: expected a non-negative integer, got {raw!r}")
        return None
    return raw


@dataclass(frozen=True, slots=True, kw_only=True)
class ArgRule:
    """One argument constraint: the value must (or, for ``not_*``, must not) match."""

    tool: str
    argument: str
    kind: str
    pattern: str
    compiled: UserPattern

    def violated(self, value: str) -> bool:
        matched = (
            self.compiled.match(value)
            if self.kind.endswith("glob")
            else self.compiled.search(value)
        ) is not None
        return matched if self.kind.startswith("not_") else not matched

    def describe(self) -> str:
        verb = "must not match" if self.kind.startswith("not_") else "must match"
        return f"{verb} {self.kind.removeprefix('not_')} {self.pattern!r}"


def _arg_rules(raw: Any, path: str, problems: list[str]) -> tuple[ArgRule, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, Mapping):
        problems.append(f"{path}: expected {{tool: {{argument: glob or {{regex: ...}}}}}}")
        return ()
    rules = []
    for tool, per_arg in raw.items():
        if not isinstance(per_arg, Mapping):
            problems.append(f"{path}.{tool}: expected {{argument: glob or {{regex: ...}}}}")
            continue
        for arg, spec in per_arg.items():
            where = f"{path}.{tool}.{arg}"
            if isinstance(spec, str):
                kind, pattern = "glob", spec
            elif isinstance(spec, Mapping) and len(spec) == 1 and next(iter(spec)) in RULE_KINDS:
                kind, pattern = next(iter(spec.items()))
            else:
                problems.append(
                    f"{where}: expected a glob string or one of {{{'|'.join(RULE_KINDS)}: pattern}}"
                )
                continue
            if not isinstance(pattern, str):
                problems.append(f"{where}: the {kind} pattern must be a string")
                continue
            try:
                compiled = (
                    glob_to_regex(pattern)
                    if kind.endswith("glob")
                    else compile_user_pattern(pattern)
                )
            except PatternError as exc:
                problems.append(
                    f"{where}: invalid regular expression {pattern!r}: {exc} "
                    "(fix the pattern, or use {glob: ...} for a path pattern)"
                )
                continue
            rules.append(
                ArgRule(
                    tool=str(tool), argument=str(arg), kind=kind, pattern=pattern, compiled=compiled
                )
            )
    return tuple(rules)


def _order(raw: Any, path: str, problems: list[str]) -> tuple[tuple[str, str], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        problems.append(f"{path}: expected a list of {{before: tool, after: tool}}")
        return ()
    out = []
    for i, item in enumerate(raw):
        if (
            not isinstance(item, Mapping)
            or set(item) != {"before", "after"}
            or not all(isinstance(v, str) and v for v in item.values())
        ):
            problems.append(f"{path}[{i}]: expected {{before: <tool>, after: <tool>}}")
            continue
        out.append((item["before"], item["after"]))
    return tuple(out)


def _schemas(raw: Any, path: str, problems: list[str]) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        problems.append(f"{path}: expected {{tool: JSON Schema}}")
        return {}
    from spanjudge.evaluators.validity_schema import schema_error  # only with schemas configured

    out = {}
    for tool, schema in raw.items():
        error = schema_error(schema)
        if error:
            problems.append(f"{path}.{tool}: the JSON Schema does not parse: {error}")
        else:
            out[str(tool)] = schema
    return out
