"""JSON Schema checks for `trajectory_validity`: `jsonschema` when installed, else a small
built-in validator (type, required, enum, const, properties, items, additionalProperties).

Schemas repeat across sessions (each trace records the same tool definitions), so schema checks
and compiled validators are cached by the schema's canonical JSON.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

# Found without importing it: jsonschema costs ~100 ms of start-up, and most runs check no schema.
VALIDATOR = "jsonschema" if importlib.util.find_spec("jsonschema") is not None else "builtin"


_UNLOADED: Any = object()
# The jsonschema module (imported by name: optional, typed loosely on purpose), None when it is
# not installed; imported on first use.
_jsonschema: Any = _UNLOADED


def _module() -> Any:
    global _jsonschema
    if _jsonschema is _UNLOADED:
        _jsonschema = importlib.import_module("jsonschema") if VALIDATOR == "jsonschema" else None
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
    key = _canonical(schema)
    return _schema_error(key, _module() is not None) if key is not None else _check(schema)


@lru_cache(maxsize=1024)
def _schema_error(key: str, with_jsonschema: bool) -> str | None:
    # `with_jsonschema` is part of the key: the answer depends on which validator runs.
    return _check(json.loads(key))


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
    if _module() is not None:
        key = _canonical(schema)
        validator = _validator(key) if key is not None else _compile(schema)
        return [
            f"{'/'.join(str(p) for p in e.absolute_path) or 'arguments'}: {e.message}"
            for e in sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
        ]
    return _builtin(value, schema, "arguments")


@lru_cache(maxsize=1024)
def _validator(key: str) -> Any:
    return _compile(json.loads(key))


def _compile(schema: Any) -> Any:
    return _module().validators.validator_for(schema)(schema)


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
