"""Constraint options of `trajectory_validity`: argument rules (glob / regex), ordering pairs,
step limits and explicit schemas, parsed with every problem reported at its config path; and the
JSON Schema checks of tool arguments, by `jsonschema` (Draft 2020-12 unless a schema names
another draft in `$schema`).

`jsonschema` is imported by the first schema checked (most runs check none). A schema is checked
and compiled once: schemas repeat across spans and sessions (each trace records the same tool
definitions), so the result is cached by object, then by canonical JSON.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from spanjudge.patterns import PatternError, UserPattern, compile_user_pattern
from spanjudge.remembered import SHORT_CHARS
from spanjudge.spans import jsonfast

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

RULE_KINDS = ("glob", "regex", "not_glob", "not_regex")
# `json.dumps(value, sort_keys=True)` with its encoder made once, not once a call
_sorted_json = json.JSONEncoder(sort_keys=True).encode
# `json.dumps(value, sort_keys=True, default=str)` with its encoder made once, not once a call
_canonical_json = json.JSONEncoder(sort_keys=True, default=str).encode


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
    out = {}
    for tool, schema in raw.items():
        error = schema_error(schema)
        if error:
            problems.append(f"{path}.{tool}: the JSON Schema does not parse: {error}")
        else:
            out[str(tool)] = schema
    return out


def unwrap_schema(raw: Any) -> Any:
    """The JSON Schema inside a recorded tool definition (`{"json": {...}}`, JSON text)."""
    if isinstance(raw, str):
        try:
            raw = jsonfast.parse(raw)
        except ValueError:  # not JSON, or nested deeper than json reads
            return None
    if isinstance(raw, Mapping) and isinstance(raw.get("json"), Mapping):
        raw = raw["json"]
    return raw if isinstance(raw, Mapping) else None


def schema_error(schema: Any) -> str | None:
    """Why ``schema`` is not a usable JSON Schema, or None."""
    if not isinstance(schema, (Mapping, bool)):
        return f"expected a JSON Schema object, got {type(schema).__name__}"
    return _checked(schema).error


class UnusableSchema(ValueError):
    """A schema that is a valid schema but validates nothing: a `$ref` that points nowhere,
    or back to itself without end."""


def validate_schema(value: Any, schema: Any) -> list[str]:
    """Every way ``value`` breaks ``schema``, as readable messages ordered by where they are;
    `UnusableSchema` when the schema cannot validate anything."""
    checked = _checked(schema)
    if checked.validator is None:
        import jsonschema

        checked.validator = jsonschema.validators.validator_for(checked.source)(checked.source)
    # Agents call a tool with the same arguments again and again (retries, loops, the same task
    # run many times): each distinct value is validated once per schema. Only short values are
    # remembered (`remembered.SHORT_CHARS`): arguments may be 64 KiB each, and a count of them
    # alone would bound nothing that matters.
    try:
        key: str | None = _sorted_json(value)
    except (TypeError, ValueError):
        key = None
    if key is not None and len(key) > SHORT_CHARS:
        key = None
    known = checked.results.get(key) if key is not None else None
    if known is None:
        from referencing.exceptions import Unresolvable

        try:
            errors = sorted(
                checked.validator.iter_errors(value), key=lambda e: list(e.absolute_path)
            )
        except Unresolvable as exc:
            raise UnusableSchema(f"a $ref cannot be resolved: {exc}") from None
        except RecursionError:  # a $ref back to itself, met again at every level of the value
            raise UnusableSchema("validating recursed without end through its $ref") from None
        known = tuple(f"{_where(e.absolute_path)}: {e.message}" for e in errors)
        if key is not None:
            if len(checked.results) >= _CACHE_SIZE:
                checked.results.clear()
            checked.results[key] = known
            _hold(len(key) + sum(len(m) for m in known))
    return list(known)


def _where(path: Iterable[Any]) -> str:
    return "/".join(str(p) for p in path) or "arguments"


@dataclass(slots=True)
class _Checked:
    """One schema, checked once: its problem, and jsonschema's validator for it."""

    error: str | None
    # What jsonschema checks and compiles: the schema read back from its canonical JSON (sorted
    # keywords, so the errors of one place come in the same order whatever order the trace
    # recorded the keywords in).
    source: Any
    validator: Validator | None = None  # compiled on first use
    # a value's canonical JSON -> its messages
    results: dict[str, tuple[str, ...]] = field(default_factory=dict)


_CACHE_SIZE = 1024
# The characters of schemas and of remembered results the caches hold, all schemas together: a
# count alone bounds nothing that matters when a schema or an error message may be 64 KiB.
_MAX_CHARS = 1 << 20
_held = 0
# Both caches hold their schemas, so an id is never reused while cached.
_by_id: dict[int, tuple[Any, _Checked]] = {}
_by_key: dict[str, _Checked] = {}


def _hold(chars: int) -> None:
    """``chars`` more are held; past `_MAX_CHARS`, every schema checked is forgotten."""
    global _held
    _held += chars
    if _held > _MAX_CHARS:
        _by_id.clear()
        _by_key.clear()
        _held = 0


def _checked(schema: Any) -> _Checked:
    hit = _by_id.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    key = _canonical(schema)
    checked = _by_key.get(key) if key is not None else None
    if checked is None:
        source = json.loads(key) if key is not None else schema
        checked = _Checked(error=_check(source), source=source)
        if key is not None:
            if len(_by_key) >= _CACHE_SIZE:
                _by_key.clear()
            _hold(len(key))
            _by_key[key] = checked
    if len(_by_id) >= _CACHE_SIZE:
        _by_id.clear()
    _hold(len(key) if key is not None else 0)  # the schema object kept alive by its id's entry
    _by_id[id(schema)] = (schema, checked)
    return checked


def _canonical(schema: Any) -> str | None:
    try:
        return _canonical_json(schema)
    except (TypeError, ValueError):
        return None


def _check(schema: Any) -> str | None:
    import jsonschema

    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = "/".join(str(p) for p in exc.path) or "top level"
        return f"{exc.message} (at {where})"
    return None
