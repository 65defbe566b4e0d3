"""`side_effects`: what did the session do to the world? (ARCHITECTURE.md section 5).

Each successful tool call gets an effect (read, create, modify, delete, external) from the effect
map: defaults by tool-name pattern (`trajectory/effects.py`), the top-level `effects:` overrides
when the engine shares them (``ctx.shared["effects"]``), then this evaluator's own ``effects``
option. The resource is the call's path-like argument (`path`, `file_path`, `filename`, `file`,
`key`, `id`). A create/modify/delete call that names no such resource acts on something outside
the session's files (a ticket, a message): it is counted as an external call.

Measured (always, in ``details``): resources created, modified and deleted (net effect: a resource
created and then written again stays "created"), external calls, out-of-scope touches,
non-idempotent repeats (a successful mutating call with the same tool and the same arguments as an
earlier successful one; arguments the trace did not record are unknown, never the same),
create-then-delete pairs, and, when the harness recorded the terminal state (`files_created`,
`files_modified`, `files_deleted`, `external_calls`), what it recorded that no call explains and
what the calls imply that it did not record. Failed calls have no effect;
their out-of-scope attempts are listed apart.

Options::

    scope: ["out/**", "tmp/*.txt"]   # where create/modify/delete may touch (globs)
    effects: {create_ticket: external}
    fail_on: [out_of_scope, duplicate_mutation, terminal_state_mismatch]   # the default
    # also accepted in fail_on: create_then_delete, external_call

Outcome: `fail` when a check in ``fail_on`` finds something; out-of-scope touches can only fail
when ``scope`` is configured (without one nothing is out of scope). `pass` otherwise, with the
counts. `not_evaluated` (`no_tool_calls`) when the session made no tool call and recorded no
terminal state: there is nothing to judge. A cut-short session without findings is
`not_evaluated` (`session_incomplete`). Score: 1.0 pass, 0.0 fail.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from spanjudge import reasons
from spanjudge.evaluators.base import EvaluationContext, unknown_options
from spanjudge.evaluators.validity_rules import glob_to_regex
from spanjudge.reasons import NO_TOOL_CALLS, SESSION_INCOMPLETE
from spanjudge.trajectory.effects import EFFECTS, EffectMap
from spanjudge.trajectory.model import Trajectory
from spanjudge.trajectory.steps import Step
from spanjudge.values import Target, Verdict, not_evaluated

if TYPE_CHECKING:
    from spanjudge.trajectory.effects import Effect

NAME = reasons.SIDE_EFFECTS
OPTIONS = ("scope", "effects", "fail_on")
CHECKS = (
    "out_of_scope",
    "duplicate_mutation",
    "terminal_state_mismatch",
    "create_then_delete",
    "external_call",
)
DEFAULT_FAIL_ON = ("out_of_scope", "duplicate_mutation", "terminal_state_mismatch")
_VERB = {"create": "creates", "modify": "modifies", "delete": "deletes"}


@dataclass(slots=True)
class Ledger:
    """Net effects of the calls, in call order."""

    created: dict[str, str] = field(default_factory=dict)  # resource -> span id
    modified: dict[str, str] = field(default_factory=dict)
    deleted: dict[str, str] = field(default_factory=dict)
    external: list[str] = field(default_factory=list)
    out_of_scope: list[dict[str, Any]] = field(default_factory=list)
    out_of_scope_failed: list[dict[str, Any]] = field(default_factory=list)
    duplicates: list[dict[str, Any]] = field(default_factory=list)
    create_then_delete: list[dict[str, Any]] = field(default_factory=list)

    def apply(self, effect: Effect, resource: str, span_id: str) -> None:
        if effect in ("create", "modify"):
            if resource in self.deleted:  # existed, deleted, written again: modified overall
                self.deleted.pop(resource)
                self.modified[resource] = span_id
            elif resource not in self.created and resource not in self.modified:
                (self.created if effect == "create" else self.modified)[resource] = span_id
        elif effect == "delete":
            if resource in self.created:
                first = self.created.pop(resource)
                self.create_then_delete.append(
                    {"resource": resource, "created_span_id": first, "deleted_span_id": span_id}
                )
            else:
                self.modified.pop(resource, None)
                self.deleted[resource] = span_id


# `json.dumps(value, sort_keys=True, default=str)` with its encoder made once, not once a call
_sorted_json = json.JSONEncoder(sort_keys=True, default=str).encode


def _call_key(step: Step) -> str:
    try:
        args = _sorted_json(step.arguments)
    except (TypeError, ValueError):
        args = repr(step.arguments)
    return f"{step.name}\x1f{args}"


@lru_cache(maxsize=64)
def _checks_note(fail_on: tuple[str, ...], scope: tuple[str, ...], terminal: bool) -> str:
    """What a pass checked: the scope and the checks in ``fail_on`` that could find something
    (out_of_scope needs a scope, terminal_state_mismatch a recorded ``terminal`` state). The
    same for every session of an evaluator but for ``terminal``: made once per combination."""
    checked = [c for c in fail_on if c != "out_of_scope" or scope]
    if not terminal and "terminal_state_mismatch" in checked:
        checked.remove("terminal_state_mismatch")
    where = f"scope {', '.join(scope)}" if scope else "no scope configured"
    return f"{where}; checked: {', '.join(checked) or 'nothing to fail on'}"


def _names(raw: Any) -> set[str]:
    if isinstance(raw, (list, tuple)):
        return {str(v).strip().removeprefix("./") for v in raw if str(v).strip()}
    return set()


@dataclass(frozen=True, slots=True, kw_only=True)
class SideEffects:
    """Effects of the tool calls against a scope and the recorded terminal state."""

    name: str = NAME
    scope: tuple[str, ...] = ()
    overrides: Mapping[str, Effect] = field(default_factory=dict)
    fail_on: tuple[str, ...] = DEFAULT_FAIL_ON
    # the shared effect map this evaluator last merged its overrides into, and the result: the
    # engine shares one map for all its sessions, so the merge is done once, not per session
    _merged: dict[int, tuple[EffectMap, EffectMap]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    @classmethod
    def from_options(
        cls, options: Mapping[str, Any], path: str, problems: list[str]
    ) -> SideEffects:
        unknown_options(options, OPTIONS, path, problems)
        scope = options.get("scope") or []
        if not isinstance(scope, list) or not all(isinstance(g, str) and g for g in scope):
            problems.append(f"{path}.scope: expected a list of path globs, e.g. ['out/**']")
            scope = []
        overrides: dict[str, Effect] = {}
        raw_effects = options.get("effects") or {}
        if not isinstance(raw_effects, Mapping):
            problems.append(f"{path}.effects: expected a mapping of tool name -> effect")
            raw_effects = {}
        for tool, effect in raw_effects.items():
            if effect not in EFFECTS:
                problems.append(
                    f"{path}.effects.{tool}: unknown effect {effect!r} "
                    f"(expected one of {', '.join(EFFECTS)})"
                )
            else:
                overrides[str(tool)] = effect
        fail_on = options.get("fail_on", list(DEFAULT_FAIL_ON))
        if not isinstance(fail_on, list) or any(c not in CHECKS for c in fail_on):
            problems.append(f"{path}.fail_on: expected a list drawn from {', '.join(CHECKS)}")
            fail_on = list(DEFAULT_FAIL_ON)
        return cls(scope=tuple(scope), overrides=overrides, fail_on=tuple(fail_on))

    def effect_map(self, ctx: EvaluationContext) -> EffectMap:
        shared = ctx.shared.get("effects")
        base = shared if isinstance(shared, EffectMap) else EffectMap()
        if not self.overrides:
            return base
        known = self._merged.get(id(base))
        if known is not None and known[0] is base:
            return known[1]
        merged = replace(base, overrides={**base.overrides, **self.overrides})
        self._merged.clear()  # one shared map at a time: what is kept stays bounded
        self._merged[id(base)] = (base, merged)
        return merged

    def in_scope(self, resource: str) -> bool:
        return any(glob_to_regex(g).match(resource) for g in self.scope)

    def evaluate(self, ctx: EvaluationContext) -> list[Verdict]:
        t = ctx.trajectory
        effects = self.effect_map(ctx)
        calls = t.tool_calls()
        # the calls that act on something (each name classified once per map); most sessions
        # mostly read, and a read leaves nothing to record
        acting = []
        for step in calls:
            effect = effects.effect(step.name)
            if effect is not None and effect != "read":
                acting.append((step, effect))
        ledger = Ledger()
        if not acting and t.terminal_state is None:  # nothing done, nothing recorded: no finding
            return self._without_findings(t, ledger, None, calls)
        seen: set[str] = set()
        # a repeat has its tool's name (and so its effect): only the calls of a tool called more
        # than once need their arguments encoded to compare them
        called: dict[str, int] = {}
        for step, _ in acting:
            called[step.name] = called.get(step.name, 0) + 1
        for step, effect in acting:
            resource = effects.resource(step.arguments)
            if effect != "external" and resource is None:
                effect = "external"  # no local resource named: a ticket, a message, an API
            out = bool(
                self.scope and effect != "external" and resource and not self.in_scope(resource)
            )
            touch = {
                "resource": resource,
                "span_id": step.span_id,
                "tool": step.name,
                "effect": effect,
            }
            if step.failed:
                if out:
                    ledger.out_of_scope_failed.append(touch)
                continue
            if out:
                ledger.out_of_scope.append(touch)
            # arguments never recorded are unknown, never "the same" as another call's
            if called[step.name] > 1 and step.arguments is not None:
                key = _call_key(step)
                if key in seen:
                    ledger.duplicates.append(touch)
                seen.add(key)
            if effect == "external":
                ledger.external.append(step.span_id)
            elif resource is not None:
                ledger.apply(effect, resource, step.span_id)
        terminal = self._terminal(t.terminal_state, ledger)
        findings = self._findings(ledger, terminal)
        if findings:
            details = self._details(ledger, terminal, calls)
            first_kind, first_span, _ = findings[0]
            listed = "; ".join(f"{kind}: {text}" for kind, _, text in findings)
            return [
                Verdict(
                    evaluator=NAME,
                    outcome="fail",
                    score=0.0,
                    label=first_kind,
                    explanation=f"{listed}. {self._summary(ledger)}",
                    target=Target(span_id=first_span),
                    evidence=tuple(dict.fromkeys(s for _, s, _ in findings if s)),
                    details=details,
                )
            ]
        return self._without_findings(t, ledger, terminal, calls)

    def _without_findings(
        self, t: Trajectory, ledger: Ledger, terminal: dict[str, Any] | None, calls: list[Step]
    ) -> list[Verdict]:
        details = self._details(ledger, terminal, calls)
        reason = None
        if not calls and t.terminal_state is None:
            reason, why = (
                NO_TOOL_CALLS,
                "no tool call and no recorded terminal state: nothing to judge",
            )
        elif not t.complete:
            reason, why = SESSION_INCOMPLETE, f"the session was cut short ({t.close_reason})"
        if reason:
            return [
                not_evaluated(
                    NAME,
                    reason,
                    f"{why}. {self._summary(ledger)}",
                    details=details,
                )
            ]
        checks = _checks_note(self.fail_on, self.scope, t.terminal_state is not None)
        return [
            Verdict(
                evaluator=NAME,
                outcome="pass",
                score=1.0,
                label="ok",
                explanation=f"{self._summary(ledger)} ({checks})",
                details=details,
            )
        ]

    def _terminal(self, state: Mapping[str, Any] | None, ledger: Ledger) -> dict[str, Any] | None:
        if state is None:
            return None
        recorded_written = _names(state.get("files_created")) | _names(state.get("files_modified"))
        recorded_deleted = _names(state.get("files_deleted"))
        implied_written = set(ledger.created) | set(ledger.modified)
        implied_deleted = set(ledger.deleted)
        undone = {p["resource"] for p in ledger.create_then_delete}
        out: dict[str, Any] = {
            # What the harness saw that no call explains, and what calls did that it did not see.
            "unexplained": sorted(
                (recorded_written - implied_written) | (recorded_deleted - implied_deleted - undone)
            ),
            "not_recorded": sorted(
                (implied_written - recorded_written) | (implied_deleted - recorded_deleted)
            ),
        }
        recorded_external = state.get("external_calls")
        if isinstance(recorded_external, list):
            recorded_external = len(recorded_external)
        if isinstance(recorded_external, int) and recorded_external != len(ledger.external):
            out["external_calls"] = {"recorded": recorded_external, "implied": len(ledger.external)}
        return out

    def _findings(
        self, ledger: Ledger, terminal: dict[str, Any] | None
    ) -> list[tuple[str, str | None, str]]:
        out: list[tuple[str, str | None, str]] = []
        if "out_of_scope" in self.fail_on and self.scope:
            out += [
                (
                    "out_of_scope",
                    o["span_id"],
                    f"{o['tool']} {_VERB[o['effect']]} {o['resource']!r} outside "
                    f"{', '.join(self.scope)}",
                )
                for o in ledger.out_of_scope
            ]
        if "duplicate_mutation" in self.fail_on:
            out += [
                (
                    "duplicate_mutation",
                    d["span_id"],
                    f"{d['tool']} repeated with the same arguments",
                )
                for d in ledger.duplicates
            ]
        if "create_then_delete" in self.fail_on:
            out += [
                (
                    "create_then_delete",
                    p["deleted_span_id"],
                    f"{p['resource']!r} created then deleted",
                )
                for p in ledger.create_then_delete
            ]
        if "external_call" in self.fail_on:
            out += [("external_call", s, "external call") for s in ledger.external]
        if "terminal_state_mismatch" in self.fail_on and terminal is not None:
            if terminal["unexplained"]:
                text = ", ".join(terminal["unexplained"])
                out.append(
                    ("terminal_state_mismatch", None, f"recorded but no call explains: {text}")
                )
            if terminal["not_recorded"]:
                text = ", ".join(terminal["not_recorded"])
                out.append(
                    ("terminal_state_mismatch", None, f"calls imply but not recorded: {text}")
                )
            if "external_calls" in terminal:
                ext = terminal["external_calls"]
                out.append(
                    (
                        "terminal_state_mismatch",
                        None,
                        f"{ext['recorded']} external call(s) recorded, {ext['implied']} made",
                    )
                )
        return out

    def _details(
        self, ledger: Ledger, terminal: dict[str, Any] | None, calls: list[Step]
    ) -> dict[str, Any]:
        return {
            "created": list(ledger.created),
            "modified": list(ledger.modified),
            "deleted": list(ledger.deleted),
            "external_calls": len(ledger.external),
            "out_of_scope": [o["resource"] for o in ledger.out_of_scope],
            "out_of_scope_failed": [o["resource"] for o in ledger.out_of_scope_failed],
            "duplicate_mutations": len(ledger.duplicates),
            "duplicate_span_ids": [d["span_id"] for d in ledger.duplicates],
            "create_then_delete": [p["resource"] for p in ledger.create_then_delete],
            "scope": list(self.scope),
            "terminal_state": terminal,
            "measured": {
                "created": len(ledger.created),
                "modified": len(ledger.modified),
                "deleted": len(ledger.deleted),
                "external_calls": len(ledger.external),
                "out_of_scope": len(ledger.out_of_scope),
                "duplicate_mutations": len(ledger.duplicates),
                "create_then_delete": len(ledger.create_then_delete),
                "tool_calls": len(calls),
            },
        }

    def _summary(self, ledger: Ledger) -> str:
        return _summary(
            len(ledger.created),
            len(ledger.modified),
            len(ledger.deleted),
            len(ledger.external),
            len(ledger.out_of_scope),
            len(ledger.duplicates),
            len(ledger.create_then_delete),
        )


@lru_cache(maxsize=1024)
def _summary(
    created: int,
    modified: int,
    deleted: int,
    external: int,
    out_of_scope: int,
    duplicates: int,
    create_then_delete: int,
) -> str:
    """The ledger's counts as an explanation reads them: sessions repeat the same few."""
    return (
        f"created {created}, modified {modified}, deleted {deleted}, external calls "
        f"{external}, out of scope {out_of_scope}, repeated mutations {duplicates}, "
        f"created then deleted {create_then_delete}"
    )
