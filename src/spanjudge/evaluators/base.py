"""The evaluator protocol, its context, and the registry that builds evaluators from config."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Protocol, cast, runtime_checkable

from spanjudge import reasons
from spanjudge.errors import did_you_mean
from spanjudge.errors import unknown_options as unknown_options  # re-exported for evaluators
from spanjudge.registry import Registry
from spanjudge.sampling import JUDGED, SELECTION_KEYS, Selector
from spanjudge.trajectory.model import Trajectory
from spanjudge.values import Expectation, Verdict, not_evaluated


@runtime_checkable
class Evaluator(Protocol):
    """Judges one aspect of a session. Must return at least one verdict; may raise (the engine
    turns an exception into a `not_evaluated` verdict with ``error.type``)."""

    name: str

    def evaluate(self, ctx: EvaluationContext) -> list[Verdict]: ...


class EvaluatorFactory(Protocol):
    """Builds an evaluator from its options (``evaluators.<name>`` in the configuration, less
    ``enabled`` and ``judge``); appends every configuration problem, with ``path``, to
    ``problems`` instead of raising. Third-party factories register in the `spanjudge.evaluators`
    entry-point group."""

    def __call__(self, options: Mapping[str, Any], path: str, problems: list[str]) -> Evaluator: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class EvaluationContext:
    """What an evaluator may look at. ``judge`` is the judge configured for this evaluator."""

    trajectory: Trajectory
    expectation: Expectation
    judge: Any = None
    shared: Mapping[str, Any] = field(default_factory=dict)


@lru_cache(maxsize=1024)
def fixed_not_evaluated(
    evaluator: str, reason: str, explanation: str, judge: str = "rule"
) -> Verdict:
    """A `not_evaluated` verdict with no target, evidence or details, built once for every
    session that gets it (verdicts are frozen values): what a session without the evidence an
    evaluator needs (no expectation, no skill invoked, no condition) costs next to nothing."""
    return not_evaluated(evaluator, reason, explanation, judge=judge)


# Built-in evaluators in report order: name -> "module:factory".
EVALUATORS: Registry[EvaluatorFactory] = Registry(
    "evaluator",
    "spanjudge.evaluators",
    {
        reasons.SKILL_LOADED: "spanjudge.evaluators.skill_loaded:SkillLoaded.from_options",
        reasons.SKILL_SELECTION: "spanjudge.evaluators.skill_selection:SkillSelection.from_options",
        reasons.SKILL_OMISSION: "spanjudge.evaluators.skill_omission:SkillOmission.from_options",
        reasons.INSTRUCTION_FOLLOWING: (
            "spanjudge.evaluators.instruction_following:InstructionFollowing.from_options"
        ),
        reasons.OUTCOME: "spanjudge.evaluators.outcome:Outcome.from_options",
        reasons.TRAJECTORY_VALIDITY: (
            "spanjudge.evaluators.trajectory_validity:TrajectoryValidity.from_options"
        ),
        reasons.TRAJECTORY_MATCH: (
            "spanjudge.evaluators.trajectory_match:TrajectoryMatch.from_options"
        ),
        reasons.SIDE_EFFECTS: "spanjudge.evaluators.side_effects:SideEffects.from_options",
        reasons.COST: "spanjudge.evaluators.cost:Cost.from_options",
        reasons.ROBUSTNESS: "spanjudge.evaluators.robustness:Robustness.from_options",
        reasons.GOAL_SUCCESS: "spanjudge.evaluators.goal_success:GoalSuccess.from_options",
        reasons.TOOL_SELECTION: "spanjudge.evaluators.tool_selection:ToolSelection.from_options",
        reasons.TOOL_PARAMETERS: (
            "spanjudge.evaluators.tool_parameters:ToolParameters.from_options"
        ),
    },
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Suite:
    """The evaluators the ``evaluators`` section asks for, and which sessions each judges."""

    evaluators: tuple[Evaluator, ...]
    selector: Selector


def build_evaluators(
    options: Mapping[str, Any], problems: list[str], path: str = "evaluators"
) -> list[Evaluator]:
    """The evaluators of `build_suite`."""
    return list(build_suite(options, problems, path).evaluators)


def build_suite(options: Mapping[str, Any], problems: list[str], path: str = "evaluators") -> Suite:
    """Every known evaluator unless disabled (`enabled: false`), and every evaluator's sample
    and filter; options validated here.

    The opt-in ones (`reasons.OPT_IN_EVALUATORS`: one verdict per tool call, which multiplies
    what is emitted, and goal_success, which the engine adds once assertions are expected) are
    built only when named in ``options``. The custom evaluators
    (``options["custom"]``, a list: `evaluators.custom`) come after the others; under its own
    name (``evaluators.<name>``) a custom evaluator takes only ``sample`` and ``when``."""
    factories = EVALUATORS.checked(problems)
    # `sample` and `when` (and `judged`, their default for judged evaluators) are the engine's
    # to apply (spanjudge/sampling.py).
    selector = Selector.from_options(options, problems)
    custom_names = _custom_names(options.get(reasons.CUSTOM_SECTION))
    for name in options:
        if name == reasons.CUSTOM_SECTION or name == JUDGED:
            continue
        if name in custom_names and name not in factories:
            opts = options[name]
            if not isinstance(opts, Mapping):
                problems.append(f"{path}.{name}: expected a mapping of sample and when")
                continue
            for key in opts:
                if key not in SELECTION_KEYS:
                    problems.append(
                        f"{path}.{name}.{key}: a custom evaluator takes only "
                        f"{' and '.join(SELECTION_KEYS)} here; write its other settings in its "
                        f"{path}.{reasons.CUSTOM_SECTION} entry"
                    )
            continue
        if name not in factories:
            known = ", ".join(sorted(factories))
            hint = did_you_mean(name, [*factories, *custom_names])
            problems.append(f"{path}.{name}: unknown evaluator{hint} (known: {known})")
    built = []
    for name, factory in factories.items():
        if name in reasons.OPT_IN_EVALUATORS and name not in options:
            continue
        opts = options.get(name) or {}
        if not isinstance(opts, Mapping):
            problems.append(f"{path}.{name}: expected a mapping of options")
            continue
        enabled = opts.get("enabled", True)
        if not isinstance(enabled, bool):
            problems.append(f"{path}.{name}.enabled: expected true or false, got {enabled!r}")
        if enabled is False:
            continue
        clean = {k: v for k, v in opts.items() if k not in ("enabled", "judge", *SELECTION_KEYS)}
        if name in EVALUATORS.builtins:
            built.append(factory(clean, f"{path}.{name}", problems))
            continue
        try:  # third-party code: its failure is a configuration problem, not a traceback
            built.append(factory(clean, f"{path}.{name}", problems))
        except Exception as exc:
            problems.append(
                f"{path}.{name}: the plugin's factory raised {type(exc).__name__}: {exc}"
            )
    if reasons.CUSTOM_SECTION in options:
        # imported here: the custom evaluators' module imports this one
        from spanjudge.evaluators.custom import parse_custom

        path_custom = f"{path}.{reasons.CUSTOM_SECTION}"
        custom = parse_custom(options[reasons.CUSTOM_SECTION], path_custom, problems, factories)
        built.extend(cast("list[Evaluator]", custom))
    return Suite(evaluators=tuple(built), selector=selector)


def _custom_names(raw: Any) -> list[str]:
    """The names the ``evaluators.custom`` entries give (validated with the entries)."""
    entries = raw if isinstance(raw, list) else ()
    return [e["name"] for e in entries if isinstance(e, Mapping) and isinstance(e.get("name"), str)]
