"""The evaluator protocol, its context, and the registry that builds evaluators from config."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from spanjudge.entry_points import entry_points
from spanjudge.errors import did_you_mean
from spanjudge.errors import unknown_options as unknown_options  # re-exported for evaluators
from spanjudge.trajectory.model import Trajectory
from spanjudge.values import Expectation, Verdict

ENTRY_POINT_GROUP = "spanjudge.evaluators"


@dataclass(frozen=True, slots=True, kw_only=True)
class EvaluationContext:
    """What an evaluator may look at. ``judge`` is the judge configured for this evaluator."""

    trajectory: Trajectory
    expectation: Expectation
    judge: Any = None
    shared: Mapping[str, Any] = field(default_factory=dict)


@runtime_checkable
class Evaluator(Protocol):
    """Judges one aspect of a session. Must return at least one verdict; may raise (the engine
    turns an exception into a `not_evaluated` verdict with ``error.type``)."""

    name: str

    def evaluate(self, ctx: EvaluationContext) -> list[Verdict]: ...


# from_options(options, config_path, problems) -> Evaluator; problems get every config error.
EvaluatorFactory = Callable[[Mapping[str, Any], str, list[str]], Evaluator]

# Built-in evaluators in report order: name -> "module:factory".
BUILTIN_EVALUATORS: dict[str, str] = {
    "skill_loaded": "spanjudge.evaluators.skill_loaded:SkillLoaded.from_options",
    "skill_selection": "spanjudge.evaluators.skill_selection:SkillSelection.from_options",
    "skill_omission": "spanjudge.evaluators.skill_omission:SkillOmission.from_options",
    "instruction_following": (
        "spanjudge.evaluators.instruction_following:InstructionFollowing.from_options"
    ),
    "outcome": "spanjudge.evaluators.outcome:Outcome.from_options",
    "trajectory_validity": (
        "spanjudge.evaluators.trajectory_validity:TrajectoryValidity.from_options"
    ),
    "side_effects": "spanjudge.evaluators.side_effects:SideEffects.from_options",
    "cost": "spanjudge.evaluators.cost:Cost.from_options",
    "robustness": "spanjudge.evaluators.robustness:Robustness.from_options",
}


def _load(target: str) -> EvaluatorFactory:
    module_name, _, attr = target.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    factory: EvaluatorFactory = obj
    return factory


def available_factories() -> dict[str, EvaluatorFactory]:
    """Built-ins, then third-party evaluators from the `spanjudge.evaluators` entry-point group."""
    factories = {name: _load(target) for name, target in BUILTIN_EVALUATORS.items()}
    for ep in entry_points(ENTRY_POINT_GROUP):
        if ep.name not in factories:
            factories[ep.name] = ep.load()
    return factories


def build_evaluators(
    options: Mapping[str, Any], problems: list[str], path: str = "evaluators"
) -> list[Evaluator]:
    """Every known evaluator unless disabled (`enabled: false`); options validated here."""
    factories = available_factories()
    for name in options:
        if name not in factories:
            known = ", ".join(sorted(factories))
            hint = did_you_mean(name, factories)
            problems.append(f"{path}.{name}: unknown evaluator{hint} (known: {known})")
    built = []
    for name, factory in factories.items():
        opts = options.get(name) or {}
        if not isinstance(opts, Mapping):
            problems.append(f"{path}.{name}: expected a mapping of options")
            continue
        enabled = opts.get("enabled", True)
        if not isinstance(enabled, bool):
            problems.append(f"{path}.{name}.enabled: expected true or false, got {enabled!r}")
        if enabled is False:
            continue
        clean = {k: v for k, v in opts.items() if k not in ("enabled", "judge")}
        built.append(factory(clean, f"{path}.{name}", problems))
    return built
