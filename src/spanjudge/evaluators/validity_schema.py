"""JSON Schema checks for `trajectory_validity`: `jsonschema`'s semantics when it is installed,
else a small built-in validator (type, required, enum, const, properties, items,
additionalProperties).

With jsonschema installed, schemas inside the subset tool definitions use (`schema_subset`) are
checked by compiled closures that give jsonschema's own messages in its order, without
importing it; any other schema goes to jsonschema itself. Schemas repeat across sessions (each
trace records the same tool definitions), so each is checked and compiled once (cached by
object, then by canonical JSON).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from spanjudge.evaluators.schema_subset import Unsupported, compile_subset, run
from spanjudge.evaluators.validity_rules import validator

if TYPE_CHECKING:
    from spanjudge.evaluators.schema_subset import Check


VALIDATOR = validator()


_UNLOADED: Any = object()
# The jsonschema module (imported by name: optional, typed loosely on purpose), None when it is
# not installed; imported on first use.
_jsonschema: Any = _UNLOADED


def _module() -> Any:
    global _jsonschema
    if _jsonschema is _UNLOADED:
        if VALIDATOR == "jsonschema":  # as importlib.import_module, without importlib (warnings)
            __import__("jsonschema")
            _jsonschema = sys.modules["jsonschema"]
        else:
            _jsonschema = None
    return _jsonschema


_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list, tuple),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}


def unwrap_schema(raw: Any) -> Any:
    """The JSON Schema inside a recorded tool definition (`{"json": {...}}`, JSON text)."""
    if type(raw) is dict and "json" not in raw:
        return raw  # the common case, answered without the ABC checks below
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return None
    if isinstance(raw, Mapping) and isinstance(raw.get("json"), Mapping):
        raw = raw["json"]
    return raw if isinstance(raw, Mapping) else None


def _canonical(schema: Any) -> str | None:
    try:
        return json.dumps(schema, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return None


def schema_error(schema: Any) -> str | None:
    """Why ``schema`` is not a usable JSON Schema, or None."""
    if not isinstance(schema, (Mapping, bool)):
        return f"expected a JSON Schema object, got {type(schema).__name__}"
    if not _with_jsonschema():
        key = _canonical(schema)
        return _check(json.loads(key) if key is not None else schema)
    return _checked(schema).error


def _with_jsonschema() -> bool:
    """jsonschema's semantics apply: it is installed (and not switched off by a test). It is
    imported only for a schema outside `schema_subset`."""
    return VALIDATOR == "jsonschema" and _jsonschema is not None


@dataclass(slots=True)
class _Checked:
    """One schema, checked once: its problem, and how to validate against it."""

    error: str | None
    fast: Check | None  # the subset checker; None: jsonschema validates
    source: Any  # what jsonschema compiles (the canonical copy, as before)
    validator: Any = None  # jsonschema's, compiled on first use


# Schemas repeat across spans and sessions (every trace records the same tool definitions, and
# the presets share one parsed copy of each definition string): checked once per object, then
# once per canonical JSON. Both caches hold their schemas, so an id is never reused while cached.
_CACHE_SIZE = 1024
_by_id: dict[int, tuple[Any, _Checked]] = {}
_by_key: dict[str, _Checked] = {}


def _checked(schema: Any) -> _Checked:
    hit = _by_id.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    key = _canonical(schema)
    checked = _by_key.get(key) if key is not None else None
    if checked is None:
        source = json.loads(key) if key is not None else schema
        fast = compile_subset(source)
        # inside the subset and valid under the 2020-12 meta-schema: nothing for jsonschema
        error = None if fast is not None else _check(source)
        checked = _Checked(error=error, fast=fast, source=source)
        if key is not None:
            if len(_by_key) >= _CACHE_SIZE:
                _by_key.clear()
            _by_key[key] = checked
    if len(_by_id) >= _CACHE_SIZE:
        _by_id.clear()
    _by_id[id(schema)] = (schema, checked)
    return checked


def _check(schema: Any) -> str | None:
    jsonschema = _module()
    if jsonschema is not None:
        try:
            jsonschema.validators.validator_for(schema).check_schema(schema)
        except jsonschema.SchemaError as exc:
            where = "/".join(str(p) for p in exc.path) or "top level"
            return f"{exc.message} (at {where})"
        return None
    if isinstance(schema, Mapping):
        kind = schema.get("type")
        names = kind if isinstance(kind, list) else [kind] if kind is not None else []
        unknown = [n for n in names if n not in _TYPES]
        if unknown:
            return f"unknown type {unknown[0]!r} (expected one of {', '.join(_TYPES)})"
    return None


def validate_schema(value: Any, schema: Any) -> list[str]:
    """Every way ``value`` breaks ``schema``, as readable messages."""
    if not _with_jsonschema():
        return _builtin(value, schema, "arguments")
    checked = _checked(schema)
    if checked.fast is not None:
        try:
            return [f"{_where(path)}: {message}" for path, message in run(checked.fast, value)]
        except Unsupported:  # not plain JSON (a tuple, a Decimal): jsonschema decides
            pass
    if checked.validator is None:
        checked.validator = _module().validators.validator_for(checked.source)(checked.source)
    return [
        f"{_where(e.absolute_path)}: {e.message}"
        for e in sorted(checked.validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    ]


def _where(path: Iterable[Any]) -> str:
    return "/".join(str(p) for p in path) or "arguments"


def _is_type(value: Any, name: str) -> bool:
    if name in ("integer", "number") and isinstance(value, bool):
        return False
    if name == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _TYPES.get(name, object))


def _builtin(value: Any, schema: Any, where: str) -> list[str]:
    if not isinstance(schema, Mapping):
        return [] if schema is not False else [f"{where}: not allowed"]
    out: list[str] = []
    kind = schema.get("type")
    names = kind if isinstance(kind, list) else [kind] if kind else []
    if names and not any(_is_type(value, n) for n in names):
        return [f"{where}: {value!r} is not of type {' or '.join(map(repr, names))}"]
    if "enum" in schema and value not in schema["enum"]:
        out.append(f"{where}: {value!r} is not one of {schema['enum']!r}")
    if "const" in schema and value != schema["const"]:
        out.append(f"{where}: {value!r} was expected to be {schema['const']!r}")
    if isinstance(value, Mapping):
        props = schema.get("properties") or {}
        for key in schema.get("required") or []:
            if key not in value:
                out.append(f"{where}: {key!r} is a required property")
        for key, item in value.items():
            if key in props:
                out.extend(
                    _builtin(
                        item, props[key], f"{key}" if where == "arguments" else f"{where}/{key}"
                    )
                )
            elif schema.get("additionalProperties") is False:
                out.append(f"{where}: additional property {key!r} is not allowed")
    if isinstance(value, (list, tuple)) and isinstance(schema.get("items"), Mapping):
        for i, item in enumerate(value):
            out.extend(_builtin(item, schema["items"], f"{where}/{i}"))
    return out
