"""The judge extension point's Protocols and kinds (ARCHITECTURE.md section 13): `Judge`,
`JudgeFactory` (what a plugin in the `spanjudge.judges` entry-point group names), `JudgeSettings`
(what the judge lookup reads of a configuration) and `JudgeKind` (the questions asked of a judge,
listed in `spanjudge.judges.base`).

A Protocol needs `typing`, which `spanjudge eval` does not import (start-up,
`bench/bench_startup.py`): the modules a run imports name these for type checkers only, and
`spanjudge.judges` and `spanjudge.judges.base` still answer for `Judge` and `JudgeKind`
(imported from here when first asked).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    from collections.abc import Mapping

    from spanjudge.judges.base import Judgement, JudgeRequest

JudgeKind = Literal[
    "skill_selection",
    "skill_omission",
    "instruction_following",
    "outcome",
    "tool_selection",
    "tool_parameters",
]


@runtime_checkable
class Judge(Protocol):
    """``name`` is what verdicts record: ``heuristic`` or ``llm:<model>``."""

    name: str

    def judge(self, request: JudgeRequest) -> Judgement:
        """Answer ``request``; raise `JudgeError` when no trustworthy answer can be given."""
        ...


class JudgeFactory(Protocol):
    """Builds a judge of one ``type`` from its settings (``judges.<name>`` less ``type``);
    appends every configuration problem, with ``path``, to ``problems``. Third-party judge types
    register in the `spanjudge.judges` entry-point group; their settings reach them unchecked."""

    def __call__(self, settings: Mapping[str, Any], path: str, problems: list[str]) -> Judge: ...


class JudgeSettings(Protocol):
    """What the judge lookup reads of a `spanjudge.config.Config` (the configuration module
    imports this one, so the type is named by its shape)."""

    @property
    def judges(self) -> Mapping[str, Any]: ...
    @property
    def evaluators(self) -> Mapping[str, Any]: ...
    @property
    def sections(self) -> Mapping[str, Any]: ...
    @property
    def source(self) -> str | None: ...
