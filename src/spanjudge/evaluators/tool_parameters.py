"""`tool_parameters`: were each tool call's arguments right and grounded in the context?

Opt-in (``evaluators: {tool_parameters: {}}``): one verdict per tool call, targeted at the call's
span and ``tool_call_id``; pass = the arguments fit the tool's schema and come from the request,
earlier tool outputs or the loaded skill. ``not_evaluated``: ``no_tool_calls``, ``no_request``,
``arguments_not_recorded`` (content capture off).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from spanjudge import reasons
from spanjudge.evaluators.base import EvaluationContext, unknown_options
from spanjudge.evaluators.tool_selection import judge_tool_calls
from spanjudge.values import Verdict

NAME = reasons.TOOL_PARAMETERS


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolParameters:
    name: str = NAME

    @classmethod
    def from_options(
        cls, options: Mapping[str, Any], path: str, problems: list[str]
    ) -> ToolParameters:
        unknown_options(options, (), path, problems)
        return cls()

    def evaluate(self, ctx: EvaluationContext) -> list[Verdict]:
        return judge_tool_calls(
            NAME, "tool_parameters", ctx, ("right_arguments", "wrong_arguments")
        )
