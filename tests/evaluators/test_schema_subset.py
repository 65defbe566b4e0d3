"""The compiled JSON Schema subset says exactly what jsonschema says (a differential test).

`trajectory_validity` checks tool arguments against recorded schemas with `schema_subset`
when a schema stays inside it, and with jsonschema otherwise: the messages a user reads must
not depend on which one ran. Checked against jsonschema's Draft 2020-12 validator on every
schema the fixtures record (with the arguments they record) and on generated schemas and
values, valid or not, inside the subset or not.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import jsonschema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spanjudge.evaluators import validity_schema
from spanjudge.evaluators.schema_subset import compile_subset
from tests.conftest import FIXTURES
from tests.support.reports import evaluate_fixture


def reference_errors(value: Any, schema: Any) -> list[str]:
    """What validate_schema said before the subset existed: jsonschema's errors by path, the
    schema read back from its canonical JSON (keywords in sorted order, as it was cached)."""
    schema = json.loads(json.dumps(schema, sort_keys=True))
    validator = jsonschema.validators.validator_for(schema)(schema)
    return [
        f"{'/'.join(str(p) for p in e.absolute_path) or 'arguments'}: {e.message}"
        for e in sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    ]


def reference_problem(schema: Any) -> str | None:
    schema = json.loads(json.dumps(schema, sort_keys=True))
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        return f"{exc.message} (at {'/'.join(str(p) for p in exc.path) or 'top level'})"
    return None


def assert_same(value: Any, schema: Any) -> None:
    problem = reference_problem(schema)
    assert validity_schema.schema_error(schema) == problem, schema
    if compile_subset(schema) is not None:  # the subset never accepts what jsonschema rejects
        assert problem is None, schema
    if problem is None:
        assert validity_schema.validate_schema(value, schema) == reference_errors(value, schema)


# --------------------------------------------------------------------------- recorded schemas


def recorded() -> list[tuple[Any, list[Any]]]:
    """(schema, the argument values recorded for its tool) for every fixture schema."""
    found: dict[str, tuple[Any, list[Any]]] = {}
    for path in sorted(FIXTURES.glob("*/*.jsonl")):
        for result in evaluate_fixture(path, {}).values():
            t = result.trajectory
            for tool, raw in t.tool_schemas.items():
                schema = validity_schema.unwrap_schema(raw)
                if schema is None:
                    continue
                key = json.dumps(schema, sort_keys=True)
                args = [s.arguments for s in t.steps if s.name == tool and s.arguments is not None]
                found.setdefault(key, (schema, []))[1].extend(args)
    return list(found.values())


def test_every_recorded_schema_is_inside_the_subset_and_agrees_with_jsonschema() -> None:
    schemas = recorded()
    assert len(schemas) >= 20  # the fixtures record dozens of tool definitions
    outside = [s for s, _ in schemas if compile_subset(s) is None]
    assert outside == []  # so evaluating them never imports jsonschema
    for schema, arguments in schemas:
        props = list((schema.get("properties") or {}).items())
        wrong = [{}, [], "x", 3, None, {name: 12345 for name, _ in props}]
        wrong += [{name: [True] for name, _ in props}, {**{n: "v" for n, _ in props}, "zz": 1}]
        recorded_values = [json.loads(a) if isinstance(a, str) else a for a in arguments]
        for value in [*recorded_values, *wrong]:
            assert_same(value, schema)


def test_evaluating_a_fixture_with_recorded_schemas_does_not_import_jsonschema() -> None:
    code = (
        "import sys\n"
        "from spanjudge.engine import Engine\n"
        "from spanjudge.offline import run_offline\n"
        "from spanjudge import CollectingSink\n"
        "w = CollectingSink()\n"
        f"run_offline([{str(FIXTURES / 'strands' / 'strands_default.jsonl')!r}], Engine(), w)\n"
        "v = [v for r in w.results for v in r.verdicts if v.evaluator == 'trajectory_validity']\n"
        "print(sum(x.details['schema_checked_calls'] for x in v), 'jsonschema' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    checked, imported = out.stdout.split()
    assert int(checked) > 10 and imported == "False"


# --------------------------------------------------------------------------- generated ones

NAMES = st.sampled_from(["a", "b", "c", "d"])
SIMPLE = ["array", "boolean", "integer", "null", "number", "object", "string"]
NUMBERS = st.integers(-3, 3) | st.sampled_from([0.0, 1.0, 2.5, -1.5, float("nan")])
VALUES = st.recursive(
    st.none() | st.booleans() | NUMBERS | st.text(alphabet="ab\u00e9", max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(NAMES, inner, max_size=3),
    max_leaves=8,
)
SIZES = st.integers(-1, 3) | st.sampled_from([1.0, 1.5, True])


def keywords(children: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Schema objects with keywords in any order, some values the meta-schema rejects, and
    now and then a keyword outside the subset."""
    options = {
        "type": st.sampled_from([*SIMPLE, "strnig"])
        | st.lists(st.sampled_from([*SIMPLE, "strnig"]), max_size=3),
        "properties": st.dictionaries(NAMES, children, max_size=3) | st.just([]),
        "required": st.lists(NAMES | st.just(1), max_size=3),
        "additionalProperties": children,
        "items": children,
        "enum": st.lists(VALUES, max_size=3) | st.just("a"),
        "const": VALUES,
        "minimum": NUMBERS | st.just(True),
        "maximum": NUMBERS,
        "exclusiveMinimum": NUMBERS,
        "exclusiveMaximum": NUMBERS | st.just("1"),
        "minLength": SIZES,
        "maxLength": SIZES,
        "minItems": SIZES,
        "maxItems": SIZES,
        "anyOf": st.lists(children, max_size=3),
        "allOf": st.lists(children, max_size=2),
        "title": st.text(max_size=2) | st.just(3),
        "description": st.text(max_size=2),
        "default": VALUES,
        "examples": st.lists(VALUES, max_size=2) | st.just({}),
        "format": st.sampled_from(["email", "date-time", 7]),
        "deprecated": st.booleans() | st.just(0),
        # outside the subset: jsonschema decides
        "pattern": st.just("^a"),
        "uniqueItems": st.booleans(),
        "nullable": st.booleans(),
        "$schema": st.just("http://json-schema.org/draft-07/schema#"),
    }
    chosen = st.lists(st.sampled_from(sorted(options)), unique=True, max_size=4)
    return chosen.flatmap(
        lambda names: st.tuples(*(st.tuples(st.just(n), options[n]) for n in names)).map(dict)
    )


SCHEMAS = st.recursive(st.booleans() | keywords(st.booleans()), keywords, max_leaves=6)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=SCHEMAS, value=VALUES)
def test_generated_schemas_and_values_get_jsonschemas_answer(schema: Any, value: Any) -> None:
    assert_same(value, schema)


@settings(max_examples=300, deadline=None)
@given(
    props=st.dictionaries(NAMES, st.sampled_from([{"type": t} for t in SIMPLE]), max_size=4),
    required=st.lists(NAMES, unique=True, max_size=3),
    extra=st.booleans() | st.sampled_from([{"type": "integer"}, {"minimum": 0}]),
    value=st.dictionaries(NAMES | st.just("zz"), VALUES, max_size=5),
)
def test_tool_shaped_schemas_agree(props: Any, required: Any, extra: Any, value: Any) -> None:
    """Object schemas as tool definitions write them (most values break them)."""
    schema = {
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": extra,
    }
    assert compile_subset(schema) is not None
    assert_same(value, schema)
