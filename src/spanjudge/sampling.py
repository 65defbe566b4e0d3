"""Which sessions an evaluator judges: a deterministic sample and a ``when:`` filter.

Per evaluator (``evaluators.<name>``), and for every judged evaluator at once
(``evaluators.judged``: the default of each evaluator that asks a judge; an evaluator's own
``sample`` or ``when`` replaces that key of the default)::

    evaluators:
      judged:
        sample: 0.1                      # judge 10% of the sessions
        when:                            # ... and only these
          environment: production        # deployment.environment.name (or .environment)
      trajectory_validity:
        when:
          agent: {regex: "^billing-"}    # the agent name (gen_ai.agent.name and equivalents)
          attributes:
            tenant.tier: [gold, platinum]

``sample`` picks a session when the first 8 bytes of the SHA-256 of its session id, read as a
fraction of 2^64, are below the rate: the same sessions on every replica, restart, re-evaluation
and evaluation process, whichever evaluator asks (a 10% sample is part of a 30% one).

``when`` holds when every key given holds: ``agent``, ``service`` (``service.name``),
``environment``, ``request`` (the session's first request) and each of ``attributes``
(a span or resource attribute of any of the session's spans). Each takes a value (equal as
text), a list of values (one of them), or a condition in the grammar of
`spanjudge.conditions` (``contains``, ``regex``, ``json_path`` + ``equals``, ``ignore_case``)
or ``{equals: value}``.

A session left out gets one ``not_evaluated`` verdict from the evaluator, with reason
``filtered_out`` (the filter is checked first) or ``not_sampled``: outside coverage, and
reports give the sampled share beside it (`emit/summary.py`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from spanjudge import semconv
from spanjudge.conditions import CONDITION_KEYS, check_rules, validate_rules
from spanjudge.errors import did_you_mean
from spanjudge.reasons import CUSTOM_SECTION as CUSTOM
from spanjudge.reasons import FILTERED_OUT, NOT_SAMPLED
from spanjudge.spans.record import SpanRecord
from spanjudge.trajectory.model import Trajectory

SELECTION_KEYS = ("sample", "when")
# `evaluators.judged`: the selection every judged evaluator starts from.
JUDGED = "judged"
WHEN_KEYS = ("agent", "service", "environment", "request", "attributes")
# what the named keys read, besides (for `agent`) the agent name the recognisers found
_NAMED: dict[str, tuple[str, ...]] = {
    "agent": (semconv.GEN_AI_AGENT_NAME,),
    "service": (semconv.SERVICE_NAME,),
    "environment": (semconv.DEPLOYMENT_ENVIRONMENT_NAME, semconv.DEPLOYMENT_ENVIRONMENT),
}
_SCALARS = (str, int, float, bool)


def sample_point(session_id: str) -> float:
    """Where a session falls in [0, 1): the same for the same id in every process."""
    digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class ValueCheck:
    """One key's condition: equal to one of ``values``, or the ``rules`` of the grammar."""

    values: tuple[str, ...] = ()
    rules: Mapping[str, Any] | None = None

    def holds(self, text: str) -> bool:
        if self.rules is None:
            return text in self.values
        if self.values and text not in self.values:
            return False
        return not any(k in self.rules for k in CONDITION_KEYS) or check_rules(self.rules, text)[0]

    def describe(self) -> str:
        parts = [f"= {' or '.join(map(repr, self.values))}"] if self.values else []
        if self.rules:
            parts += [f"{k} {v!r}" for k, v in self.rules.items()]
        return ", ".join(parts)


def _check(raw: Any, path: str, problems: list[str]) -> ValueCheck | None:
    if isinstance(raw, _SCALARS):
        return ValueCheck(values=(_text(raw),))
    if isinstance(raw, list) and raw and all(isinstance(v, _SCALARS) for v in raw):
        return ValueCheck(values=tuple(_text(v) for v in raw))
    if isinstance(raw, Mapping):
        rules = dict(raw)
        values: tuple[str, ...] = ()
        if "equals" in rules and "json_path" not in rules:  # the whole value
            equals = rules.pop("equals")
            if not isinstance(equals, _SCALARS):
                problems.append(f"{path}.equals: expected a value (text, number, true/false)")
            values = (_text(equals),)
        if not values and not any(k in rules for k in CONDITION_KEYS):
            problems.append(f"{path}: give equals, contains, regex or json_path + equals")
            return None
        validate_rules(rules, path, problems)
        return ValueCheck(values=values, rules=rules or None)
    problems.append(
        f"{path}: expected a value, a list of values, or a condition "
        "({equals: ...}, {contains: ...}, {regex: ...}, {json_path: ..., equals: ...})"
    )
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class Filter:
    """A ``when:`` block: (what it reads, its test) pairs, all of which must hold."""

    checks: tuple[tuple[str, ValueCheck], ...]

    def first_failing(self, facts: SessionFacts) -> str | None:
        """None when the session matches, else what it lacked (for the explanation)."""
        for key, test in self.checks:
            if not any(test.holds(value) for value in facts.values(key)):
                return f"{key} {test.describe()}"
        return None


def _filter(raw: Any, path: str, problems: list[str]) -> Filter | None:
    if not isinstance(raw, Mapping) or not raw:
        problems.append(
            f"{path}: expected a mapping of {', '.join(WHEN_KEYS)} -> value or condition"
        )
        return None
    checks: list[tuple[str, ValueCheck]] = []
    for key, value in raw.items():
        where = f"{path}.{key}"
        if key not in WHEN_KEYS:
            problems.append(
                f"{where}: unknown key{did_you_mean(str(key), WHEN_KEYS)}"
                f" (allowed: {', '.join(WHEN_KEYS)})"
            )
        elif key == "attributes":
            if not isinstance(value, Mapping) or not value:
                problems.append(f"{where}: expected a mapping of attribute name -> condition")
                continue
            for name, cond in value.items():
                check = _check(cond, f"{where}.{name}", problems)
                if check is not None:
                    checks.append((f"attribute {name}", check))
        else:
            check = _check(value, where, problems)
            if check is not None:
                checks.append((key, check))
    return Filter(checks=tuple(checks))


@dataclass(frozen=True, slots=True, kw_only=True)
class Selection:
    """An evaluator's sample rate and filter (None: every session)."""

    sample: float | None = None
    when: Filter | None = None

    def merged_over(self, default: Selection) -> Selection:
        """This selection, each key not given taken from ``default``."""
        return Selection(
            sample=default.sample if self.sample is None else self.sample,
            when=default.when if self.when is None else self.when,
        )

    @property
    def everything(self) -> bool:
        return self.when is None and (self.sample is None or self.sample >= 1.0)


def parse_selection(options: Mapping[str, Any], path: str, problems: list[str]) -> Selection:
    """The ``sample`` and ``when`` keys of an evaluator's options (the others are ignored)."""
    sample = options.get("sample")
    if sample is not None and (
        isinstance(sample, bool) or not isinstance(sample, (int, float)) or not 0 <= sample <= 1
    ):
        problems.append(f"{path}.sample: expected a share from 0 to 1, got {sample!r}")
        sample = None
    when = _filter(options["when"], f"{path}.when", problems) if "when" in options else None
    return Selection(sample=None if sample is None else float(sample), when=when)


@dataclass(slots=True)
class SessionFacts:
    """What filters read from one session, gathered once per key as they ask."""

    trajectory: Trajectory
    spans: Sequence[SpanRecord]
    _cache: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def values(self, key: str) -> tuple[str, ...]:
        known = self._cache.get(key)
        if known is None:
            known = self._cache[key] = tuple(dict.fromkeys(self._gather(key)))
        return known

    def _gather(self, key: str) -> Iterator[str]:
        if key == "request":
            if self.trajectory.request:
                yield self.trajectory.request
            return
        if key == "agent":
            if self.trajectory.agent_name:
                yield self.trajectory.agent_name
            yield from (t.agent_name for t in self.trajectory.turns if t.agent_name)
        names = _NAMED.get(key) or (key.removeprefix("attribute "),)
        for span in self.spans:
            for source in (span.attributes, span.resource):
                for name in names:
                    value = source.get(name)
                    if isinstance(value, (list, tuple)):
                        yield from (_text(v) for v in value)
                    elif value is not None:
                        yield _text(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class Selector:
    """Every evaluator's selection, from the ``evaluators`` section."""

    own: Mapping[str, Selection] = field(default_factory=dict)
    judged: Selection = field(default_factory=Selection)

    @classmethod
    def from_options(cls, evaluators: Mapping[str, Any], problems: list[str]) -> Selector:
        """Every selection in ``evaluators``: each evaluator's own (``evaluators.<name>``, and
        for a custom evaluator its ``evaluators.custom[i]`` entry too) and the judged default."""
        own: dict[str, Selection] = {}
        judged = Selection()
        custom = evaluators.get(CUSTOM)
        for i, entry in enumerate(custom if isinstance(custom, list) else ()):
            name = entry.get("name") if isinstance(entry, Mapping) else None
            if not isinstance(name, str) or not any(key in entry for key in SELECTION_KEYS):
                continue  # a malformed entry is reported by the custom evaluators' validation
            own[name] = parse_selection(entry, f"evaluators.{CUSTOM}[{i}]", problems)
            options = evaluators.get(name)
            if isinstance(options, Mapping) and any(key in options for key in SELECTION_KEYS):
                problems.append(
                    f"evaluators.{name}: its sample or when is also given in "
                    f"evaluators.{CUSTOM}[{i}]; keep one of the two"
                )
        for name, options in evaluators.items():
            if not isinstance(options, Mapping) or name in own:
                continue
            if name == JUDGED:
                for key in options:
                    if key not in SELECTION_KEYS:
                        problems.append(
                            f"evaluators.{JUDGED}.{key}: unknown setting (allowed: "
                            f"{', '.join(SELECTION_KEYS)}; `{JUDGED}` is the default for every "
                            "judged evaluator)"
                        )
                judged = parse_selection(options, f"evaluators.{JUDGED}", problems)
            elif any(key in options for key in SELECTION_KEYS):
                own[str(name)] = parse_selection(options, f"evaluators.{name}", problems)
        return cls(own=own, judged=judged)

    def selection(self, evaluator: str, *, judged: bool) -> Selection:
        own = self.own.get(evaluator, Selection())
        return own.merged_over(self.judged) if judged else own

    @property
    def configured(self) -> bool:
        return bool(self.own) or not self.judged.everything


def left_out(selection: Selection, facts: SessionFacts) -> tuple[str, str] | None:
    """(reason, explanation) when ``selection`` leaves the session out, else None."""
    if selection.when is not None:
        lacking = selection.when.first_failing(facts)
        if lacking is not None:
            return FILTERED_OUT, f"left out by the evaluator's `when:` filter (no {lacking})"
    if selection.sample is not None and selection.sample < 1.0:
        point = sample_point(facts.trajectory.session_id)
        if point >= selection.sample:
            return NOT_SAMPLED, (
                f"outside the evaluator's {selection.sample * 100:g}% sample"
                f" (this session's id falls at {point:.3f})"
            )
    return None
