"""`trajectory_validity`: were the tool calls allowed, well-formed and in order?
(ARCHITECTURE.md section 5).

Options (all optional; ``evaluators.trajectory_validity`` in the config)::

    allowed_tools: [read_csv, write_file, "get_*"]     # globs; anything else is a violation
    forbidden_tools: [delete_file, "shell*"]           # globs
    arguments:                                         # per tool, per argument
      write_file:
        path: "out/**"                                 # a string is a glob the value must match
        content: {regex: "^[^<]*$"}                    # or {glob|regex|not_glob|not_regex: ...}
    schemas: {write_file: {type: object, required: [path]}}   # JSON Schema per tool
    trace_schemas: true        # also validate against the schemas the trace recorded (default)
    order: [{before: read_csv, after: write_file}]   # each `after` needs an earlier `before`
    max_steps: 12              # tool calls + skill loads
    max_tool_calls: 10         # tool calls only (skill loads excluded: ARCHITECTURE.md section 4)

Skill loads are tool calls from the agent's point of view: they are checked against the tool
lists, argument rules and schemas under their tool name (e.g. `skills`). Globs: `*` and `?`
stay within one path segment, `**` crosses segments; values are compared with a leading `./`
removed.

Schemas are checked by `jsonschema` (Draft 2020-12 unless a schema's `$schema` names another
draft; `format` is an annotation); the details say `"validator": "jsonschema"`. A recorded schema
that is not a valid JSON Schema is not used; a configured one stops start-up. A schema whose
`$ref` leads nowhere (or only back to itself) checks nothing, with a note in the details.
Arguments recorded as text that is not JSON (e.g. truncated by size caps) are not checked.

Outcome: `fail` with every violation enumerated (span id, tool, kind, message) in the
explanation and in ``details["violations"]``; `pass` when checks ran and found nothing;
`not_evaluated` with `no_constraints` when nothing is configured and no called tool has a recorded
schema (the counts are still in the details), and with `session_incomplete` when a cut-short
session has no violation so far. Score: 1.0 pass, 0.0 fail.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from spanjudge import reasons
from spanjudge.evaluators.base import EvaluationContext, unknown_options
from spanjudge.evaluators.validity_rules import (
    ArgRule,
    UnusableSchema,
    _arg_rules,
    _limit,
    _order,
    _schemas,
    _str_list,
    glob_to_regex,
    norm_value,
    schema_error,
    unwrap_schema,
    validate_schema,
)
from spanjudge.reasons import NO_CONSTRAINTS, SESSION_INCOMPLETE
from spanjudge.spans import jsonfast
from spanjudge.trajectory.steps import Step
from spanjudge.trajectory.toolnames import candidates, same_tool
from spanjudge.values import Target, Verdict, not_evaluated

NAME = reasons.TRAJECTORY_VALIDITY
OPTIONS = (
    "allowed_tools",
    "forbidden_tools",
    "arguments",
    "schemas",
    "trace_schemas",
    "order",
    "max_steps",
    "max_tool_calls",
)
_MAX_LISTED = 20  # violations spelled out in the explanation; all of them stay in details


def _named(recorded: str, pattern: str) -> bool:
    """A config glob names the recorded tool or its base name (`trajectory/toolnames.py`)."""
    compiled = glob_to_regex(pattern)
    return any(compiled.match(name) for name in candidates(recorded))


@dataclass(frozen=True, slots=True, kw_only=True)
class TrajectoryValidity:
    """Constraints on the tool calls of a session; see the module docstring."""

    name: str = NAME
    allowed_tools: tuple[str, ...] = ()
    forbidden_tools: tuple[str, ...] = ()
    arg_rules: tuple[ArgRule, ...] = ()
    schemas: Mapping[str, Any] = field(default_factory=dict)
    trace_schemas: bool = True
    order: tuple[tuple[str, str], ...] = ()
    max_steps: int | None = None
    max_tool_calls: int | None = None

    @classmethod
    def from_options(
        cls, options: Mapping[str, Any], path: str, problems: list[str]
    ) -> TrajectoryValidity:
        unknown_options(options, OPTIONS, path, problems)
        trace_schemas = options.get("trace_schemas", True)
        if not isinstance(trace_schemas, bool):
            problems.append(f"{path}.trace_schemas: expected true or false")
            trace_schemas = True
        return cls(
            allowed_tools=_str_list(
                options.get("allowed_tools"), f"{path}.allowed_tools", problems
            ),
            forbidden_tools=_str_list(
                options.get("forbidden_tools"), f"{path}.forbidden_tools", problems
            ),
            arg_rules=_arg_rules(options.get("arguments"), f"{path}.arguments", problems),
            schemas=_schemas(options.get("schemas"), f"{path}.schemas", problems),
            trace_schemas=trace_schemas,
            order=_order(options.get("order"), f"{path}.order", problems),
            max_steps=_limit(options.get("max_steps"), f"{path}.max_steps", problems),
            max_tool_calls=_limit(
                options.get("max_tool_calls"), f"{path}.max_tool_calls", problems
            ),
        )

    @property
    def configured(self) -> bool:
        return bool(
            self.allowed_tools
            or self.forbidden_tools
            or self.arg_rules
            or self.schemas
            or self.order
            or self.max_steps is not None
            or self.max_tool_calls is not None
        )

    def evaluate(self, ctx: EvaluationContext) -> list[Verdict]:
        t = ctx.trajectory
        calls = [s for s in t.steps if s.kind == "tool_call" or s.kind == "skill_load"]
        violations: list[dict[str, Any]] = []
        notes: list[str] = []
        schema_checked = 0
        # Without tool lists or argument rules a call has no tool violation to look for; without
        # a configured or recorded schema there is nothing to validate: neither decodes anything.
        per_call = bool(self.forbidden_tools or self.allowed_tools or self.arg_rules)
        recorded = t.tool_schemas if self.trace_schemas else {}
        # tool -> its schema (None: none usable), looked up once per tool, not once per call
        schemas: dict[str, Any] = {}
        validating = bool(self.schemas or recorded)
        for step in calls if per_call or validating else ():
            if per_call:
                violations.extend(self._tool_violations(step))
            if not validating:
                continue
            if step.name in schemas:
                schema = schemas[step.name]
            else:
                schema = schemas[step.name] = self._schema_for(step.name, recorded)
            if schema is None:
                continue
            arguments, checkable = _decoded(step.arguments)
            if not checkable:
                notes.append(f"{step.span_id}: arguments of {step.name} not recorded as JSON")
                continue
            try:
                messages = validate_schema(arguments, schema)
            except UnusableSchema as exc:  # nothing can be checked against it
                notes.append(f"the schema of {step.name} cannot be used: {exc}")
                schemas[step.name] = None
                continue
            schema_checked += 1
            for message in messages:
                violations.append(_violation("schema", step, message))
        if self.order:
            violations.extend(self._order_violations(calls))
        if self.max_steps is not None or self.max_tool_calls is not None:
            violations.extend(self._limit_violations(t.steps, calls))
        details: dict[str, Any] = {
            "violations": violations,
            "checked_calls": len(calls),
            "schema_checked_calls": schema_checked,
            "validator": "jsonschema",
            "measured": {"violations": len(violations), "steps": len(calls)},
        }
        if notes:
            details["notes"] = notes
        if violations:
            evidence = tuple(dict.fromkeys(v["span_id"] for v in violations if v["span_id"]))
            listed = "; ".join(
                f"{v['kind']} at {v['span_id'] or 'session'}: {v['message']}"
                for v in violations[:_MAX_LISTED]
            )
            more = (
                f" (+{len(violations) - _MAX_LISTED} more)" if len(violations) > _MAX_LISTED else ""
            )
            return [
                Verdict(
                    evaluator=NAME,
                    outcome="fail",
                    score=0.0,
                    label=violations[0]["kind"],
                    explanation=f"{len(violations)} violation(s): {listed}{more}",
                    target=Target(span_id=violations[0]["span_id"]),
                    evidence=evidence,
                    details=details,
                )
            ]
        if not self.configured and schema_checked == 0:
            return [
                _unjudged(
                    NO_CONSTRAINTS,
                    f"no constraints configured and none of the {len(calls)} call(s) has a "
                    "recorded tool schema; nothing to check",
                    details,
                )
            ]
        if not t.complete:
            return [
                _unjudged(
                    SESSION_INCOMPLETE,
                    f"no violation in {len(calls)} call(s) so far, but the session was cut short "
                    f"({t.close_reason})",
                    details,
                )
            ]
        checks = []
        if self.configured:
            checks.append("configured constraints")
        if schema_checked:
            checks.append(f"argument schemas ({schema_checked} call(s))")
        return [
            Verdict(
                evaluator=NAME,
                outcome="pass",
                score=1.0,
                label="valid",
                explanation=f"{len(calls)} call(s) checked against {' and '.join(checks)}: "
                "no violation",
                details=details,
            )
        ]

    def _schema_for(self, tool: str, recorded: Mapping[str, Any]) -> Any:
        if tool in self.schemas:
            return self.schemas[tool]
        if self.trace_schemas and tool in recorded:
            schema = unwrap_schema(recorded[tool])
            if schema is not None and schema_error(schema) is None:
                return schema
        return None

    def _tool_violations(self, step: Step) -> list[dict[str, Any]]:
        out = []
        if any(_named(step.name, p) for p in self.forbidden_tools):
            out.append(_violation("forbidden_tool", step, f"tool {step.name!r} is forbidden"))
        if self.allowed_tools and not any(_named(step.name, p) for p in self.allowed_tools):
            out.append(
                _violation(
                    "tool_not_allowed",
                    step,
                    f"tool {step.name!r} is not in allowed_tools ({', '.join(self.allowed_tools)})",
                )
            )
        if not self.arg_rules:
            return out
        arguments, _ = _decoded(step.arguments)
        for rule in self.arg_rules:
            if not same_tool(step.name, rule.tool):
                continue
            if not isinstance(arguments, Mapping) or rule.argument not in arguments:
                continue  # a missing argument is the schema's business, not a pattern rule's
            value = norm_value(arguments[rule.argument])
            if rule.violated(value):
                out.append(
                    _violation(
                        "argument",
                        step,
                        f"{step.name}.{rule.argument}={_short(value)} {rule.describe()}",
                        argument=rule.argument,
                    )
                )
        return out

    def _order_violations(self, calls: Sequence[Step]) -> list[dict[str, Any]]:
        out = []
        for before, after in self.order:
            seen_before = False
            for step in calls:
                if same_tool(step.name, before):
                    seen_before = True
                elif same_tool(step.name, after) and not seen_before:
                    out.append(
                        _violation(
                            "order", step, f"{after!r} was called before any call to {before!r}"
                        )
                    )
        return out

    def _limit_violations(
        self, steps: Sequence[Step], calls: Sequence[Step]
    ) -> list[dict[str, Any]]:
        out = []
        tool_calls = [s for s in steps if s.kind == "tool_call"]
        for limit, counted, what in (
            (self.max_steps, calls, "steps (tool calls + skill loads)"),
            (self.max_tool_calls, tool_calls, "tool calls"),
        ):
            if limit is not None and len(counted) > limit:
                first_over = counted[limit]
                out.append(
                    _violation(
                        "step_limit",
                        first_over,
                        f"{len(counted)} {what}, limit {limit}; the first over the limit is "
                        f"{first_over.name}",
                    )
                )
        return out


def _decoded(arguments: Any) -> tuple[Any, bool]:
    """(arguments as JSON values, whether they can be checked)."""
    if isinstance(arguments, str):
        try:
            return jsonfast.parse(arguments), True
        except ValueError:  # not JSON, or nested deeper than json reads
            return arguments, False
    if arguments is None:
        return {}, True  # no arguments recorded for a call that took none
    return arguments, True


def _short(value: str, width: int = 80) -> str:
    return repr(value if len(value) <= width else value[: width - 1] + "…")


def _violation(kind: str, step: Step, message: str, argument: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "kind": kind,
        "span_id": step.span_id,
        "tool": step.name,
        "turn": step.turn,
        "message": message,
    }
    if argument is not None:
        out["argument"] = argument
    return out


def _unjudged(reason: str, explanation: str, details: dict[str, Any]) -> Verdict:
    return not_evaluated(NAME, reason, explanation, details=details)
