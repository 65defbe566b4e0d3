"""The JSON Schema keywords tool definitions use, checked the way `jsonschema` checks them.

`jsonschema` costs ~100 ms to import and, per call, builds error objects through several
layers. Tool schemas recorded in traces use a small part of Draft 2020-12 (`type`,
`properties`, `required`, `additionalProperties`, `items`, `enum`, `const`, bounds, `anyOf`,
`allOf` and annotations), so `compile_subset` turns such a schema into plain closures that
yield exactly the (path, message) pairs `jsonschema`'s Draft 2020-12 validator yields, in the
same order. Anything else (another keyword, a `$schema`, a value the 2020-12 meta-schema would
reject, an argument value that is not plain JSON) is left to `jsonschema` itself:
`compile_subset` returns None and `run` raises `Unsupported`. `tests/evaluators/
test_schema_subset.py` checks both against `jsonschema` on the fixtures' schemas and on
generated schemas and values.
"""

from __future__ import annotations

from collections.abc import Callable, Sized
from typing import Any

Path = tuple[str | int, ...]
Errors = list[tuple[Path, str]]
Check = Callable[[Any, Path, Errors], None]


_SIMPLE_TYPES = frozenset({"array", "boolean", "integer", "null", "number", "object", "string"})
# The Python types of plain JSON values each type name accepts (`integer` also takes a float
# with no fractional part, as jsonschema's does)
_KINDS: dict[str, tuple[type, ...]] = {
    "array": (list,),
    "boolean": (bool,),
    "integer": (int,),
    "null": (type(None),),
    "number": (int, float),
    "object": (dict,),
    "string": (str,),
}
_SCALARS = frozenset({str, int, float, bool, type(None)})
_MAX_DEPTH = 64  # deeper schemas or values: jsonschema decides


class Unsupported(Exception):
    """Outside the subset: `jsonschema` must decide."""


# --------------------------------------------------------------------------- JSON semantics


def _is_number(value: Any) -> bool:
    return type(value) is int or type(value) is float


def _equal(one: Any, two: Any) -> bool:
    """`jsonschema._utils.equal` for plain JSON values: True is not 1, lists and objects by
    their items."""
    if one is two:
        return True
    if type(one) is str or type(two) is str:
        return bool(one == two)
    if type(one) is list and type(two) is list:
        return len(one) == len(two) and all(_equal(a, b) for a, b in zip(one, two, strict=True))
    if type(one) is dict and type(two) is dict:
        return len(one) == len(two) and all(k in two and _equal(v, two[k]) for k, v in one.items())
    if type(one) is bool or type(two) is bool:
        return False  # `one is two` already answered True is True
    return bool(one == two)


def plain(value: Any, depth: int = 0) -> bool:
    """Only dicts with string keys, lists, strings, numbers, booleans and None (what
    `json.loads` returns), nested at most `_MAX_DEPTH` deep."""
    kind = type(value)
    if kind in _SCALARS:
        return True
    if depth >= _MAX_DEPTH:
        return False
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str or (type(item) not in _SCALARS and not plain(item, depth + 1)):
                return False
        return True
    if kind is list:
        for item in value:
            if type(item) not in _SCALARS and not plain(item, depth + 1):
                return False
        return True
    return False


def _non_negative_int(value: Any) -> bool:
    kind = type(value)
    return (kind is int or (kind is float and value.is_integer())) and value >= 0


# --------------------------------------------------------------------------- compiling


def compile_subset(schema: Any) -> Check | None:
    """A checker for ``schema``, or None when jsonschema must validate (and check) it."""
    try:
        return _node(schema, 0)
    except Unsupported:
        return None


def run(check: Check, value: Any) -> Errors:
    """Every (path, message) jsonschema reports for ``value``, sorted by path as
    `validity_schema.validate_schema` sorts them; `Unsupported` for a value that is not plain
    JSON."""
    if not plain(value):
        raise Unsupported
    errors: Errors = []
    check(value, (), errors)
    errors.sort(key=lambda error: error[0])
    return errors


def _accept(value: Any, path: Path, out: Errors) -> None:
    return None


def _reject(value: Any, path: Path, out: Errors) -> None:
    out.append((path, f"False schema does not allow {value!r}"))


def _below(path: Path, key: str | int, sub: Check) -> Path:
    """The path of a value inside ``path``; jsonschema reports a `false` subschema's error at
    the enclosing value's path (its `descend` returns before adding the key)."""
    return path if sub is _reject else (*path, key)


def _node(schema: Any, depth: int) -> Check:
    if schema is True:
        return _accept
    if schema is False:
        return _reject
    if type(schema) is not dict or depth > _MAX_DEPTH:
        raise Unsupported
    checks: list[Check] = []
    for key, value in schema.items():
        maker = _KEYWORDS.get(key)
        if maker is None:
            raise Unsupported
        check = maker(value, schema, depth)
        if check is not None:
            checks.append(check)
    if not checks:
        return _accept
    if len(checks) == 1:
        return checks[0]

    def all_of_keywords(value: Any, path: Path, out: Errors) -> None:
        for check in checks:
            check(value, path, out)

    return all_of_keywords


def _schemas(value: Any, depth: int) -> list[Check]:
    """A non-empty list of schemas (`anyOf`, `allOf`)."""
    if type(value) is not list or not value:
        raise Unsupported
    return [_node(v, depth + 1) for v in value]


def _annotation(kind: type | None) -> Callable[[Any, Any, int], None]:
    def make(value: Any, schema: Any, depth: int) -> None:
        if kind is not None and type(value) is not kind:
            raise Unsupported  # the meta-schema rejects it: jsonschema says how
        return None

    return make


def _type(value: Any, schema: Any, depth: int) -> Check:
    names = [value] if type(value) is str else value
    if (
        type(names) is not list
        or not names
        or not all(type(n) is str and n in _SIMPLE_TYPES for n in names)
        or len(set(names)) != len(names)
    ):
        raise Unsupported
    reprs = ", ".join(repr(n) for n in names)
    kinds = frozenset(k for n in names for k in _KINDS[n])
    whole_floats = "integer" in names and "number" not in names

    def check(value: Any, path: Path, out: Errors) -> None:
        kind = type(value)
        if kind in kinds or (whole_floats and kind is float and value.is_integer()):
            return
        out.append((path, f"{value!r} is not of type {reprs}"))

    return check


def _properties(value: Any, schema: Any, depth: int) -> Check:
    if type(value) is not dict:
        raise Unsupported
    props = [(name, _node(sub, depth + 1)) for name, sub in value.items()]

    def check(value: Any, path: Path, out: Errors) -> None:
        if type(value) is dict:
            for name, sub in props:
                if name in value:
                    sub(value[name], _below(path, name, sub), out)

    return check


def _required(value: Any, schema: Any, depth: int) -> Check:
    if type(value) is not list or not all(type(v) is str for v in value):
        raise Unsupported
    if len(set(value)) != len(value):
        raise Unsupported
    names = list(value)

    def check(value: Any, path: Path, out: Errors) -> None:
        if type(value) is dict:
            for name in names:
                if name not in value:
                    out.append((path, f"{name!r} is a required property"))

    return check


def _additional(value: Any, schema: Any, depth: int) -> Check | None:
    sub = _node(value, depth + 1)
    declared = schema.get("properties", {})
    if type(declared) is not dict:
        raise Unsupported
    if value is True:
        return None
    if value is False:

        def deny(value: Any, path: Path, out: Errors) -> None:
            if type(value) is dict:
                extras = [k for k in value if k not in declared]
                if extras:
                    names = ", ".join(repr(k) for k in sorted(extras, key=str))
                    verb = "was" if len(extras) == 1 else "were"
                    out.append(
                        (path, f"Additional properties are not allowed ({names} {verb} unexpected)")
                    )

        return deny

    def each(value: Any, path: Path, out: Errors) -> None:
        # jsonschema walks the extras as a set; the errors are sorted by path afterwards, and
        # each extra's errors have a path of their own, so the order here does not show.
        if type(value) is dict:
            for key, item in value.items():
                if key not in declared:
                    sub(item, _below(path, key, sub), out)

    return each


def _items(value: Any, schema: Any, depth: int) -> Check | None:
    sub = _node(value, depth + 1)
    if value is True:
        return None
    if value is False:

        def none_allowed(value: Any, path: Path, out: Errors) -> None:
            if type(value) is list and value:
                rest = value if len(value) != 1 else value[0]
                out.append(
                    (path, f"Expected at most 0 items but found {len(value)} extra: {rest!r}")
                )

        return none_allowed

    def each(value: Any, path: Path, out: Errors) -> None:
        if type(value) is list:
            for i, item in enumerate(value):
                sub(item, _below(path, i, sub), out)

    return each


def _enum(value: Any, schema: Any, depth: int) -> Check:
    if type(value) is not list or not plain(value):
        raise Unsupported
    options = value

    def check(value: Any, path: Path, out: Errors) -> None:
        if all(not _equal(each, value) for each in options):
            out.append((path, f"{value!r} is not one of {options!r}"))

    return check


def _const(value: Any, schema: Any, depth: int) -> Check:
    if not plain(value):
        raise Unsupported
    expected = value

    def check(value: Any, path: Path, out: Errors) -> None:
        if not _equal(value, expected):
            out.append((path, f"{expected!r} was expected"))

    return check


def _bound(compare: Callable[[Any, Any], bool], words: str) -> Callable[[Any, Any, int], Check]:
    def make(value: Any, schema: Any, depth: int) -> Check:
        if not _is_number(value):
            raise Unsupported
        limit = value

        def check(value: Any, path: Path, out: Errors) -> None:
            if _is_number(value) and compare(value, limit):
                out.append((path, f"{value!r} {words} {limit!r}"))

        return check

    return make


def _size(kind: type[Sized], longest: bool) -> Callable[[Any, Any, int], Check]:
    def make(value: Any, schema: Any, depth: int) -> Check:
        if not _non_negative_int(value):
            raise Unsupported
        limit = value
        if longest:
            message = "is expected to be empty" if limit == 0 else "is too long"
        else:
            message = "should be non-empty" if limit == 1 else "is too short"

        def check(value: Any, path: Path, out: Errors) -> None:
            if type(value) is kind and (len(value) > limit if longest else len(value) < limit):
                out.append((path, f"{value!r} {message}"))

        return check

    return make


def _all_of(value: Any, schema: Any, depth: int) -> Check:
    subs = _schemas(value, depth)

    def check(value: Any, path: Path, out: Errors) -> None:
        for sub in subs:
            sub(value, path, out)

    return check


def _any_of(value: Any, schema: Any, depth: int) -> Check:
    subs = _schemas(value, depth)

    def check(value: Any, path: Path, out: Errors) -> None:
        for sub in subs:
            errors: Errors = []
            sub(value, path, errors)
            if not errors:
                return
        out.append((path, f"{value!r} is not valid under any of the given schemas"))

    return check


_KEYWORDS: dict[str, Callable[[Any, Any, int], Check | None]] = {
    "type": _type,
    "properties": _properties,
    "required": _required,
    "additionalProperties": _additional,
    "items": _items,
    "enum": _enum,
    "const": _const,
    "minimum": _bound(lambda v, m: v < m, "is less than the minimum of"),
    "maximum": _bound(lambda v, m: v > m, "is greater than the maximum of"),
    "exclusiveMinimum": _bound(lambda v, m: v <= m, "is less than or equal to the minimum of"),
    "exclusiveMaximum": _bound(lambda v, m: v >= m, "is greater than or equal to the maximum of"),
    "minLength": _size(str, longest=False),
    "maxLength": _size(str, longest=True),
    "minItems": _size(list, longest=False),
    "maxItems": _size(list, longest=True),
    "allOf": _all_of,
    "anyOf": _any_of,
    # annotations: no assertion (`format` asserts nothing without a format checker, as
    # validity_schema runs jsonschema), only the meta-schema's type for their value
    "title": _annotation(str),
    "description": _annotation(str),
    "$comment": _annotation(str),
    "format": _annotation(str),
    "default": _annotation(None),
    "examples": _annotation(list),
    "deprecated": _annotation(bool),
    "readOnly": _annotation(bool),
    "writeOnly": _annotation(bool),
}
