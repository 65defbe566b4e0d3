"""Judges: the heuristic default, OpenAI-compatible and Bedrock LLM judges (see ``registry`` for
the configuration)."""

from __future__ import annotations

from spanjudge.judges.base import LEVELS, Judgement, JudgeRequest
from spanjudge.judges.heuristic import HEURISTIC, HeuristicJudge
from spanjudge.registry import served_from

TYPE_CHECKING = False
if TYPE_CHECKING:
    from spanjudge.judges.protocols import Judge as Judge
    from spanjudge.judges.protocols import JudgeKind as JudgeKind

# `Judge` and `JudgeKind`, from `judges.protocols` when first asked (they need `typing`)
__getattr__ = served_from(__name__, "spanjudge.judges.protocols", "Judge", "JudgeKind")

__all__ = [
    "HEURISTIC",
    "LEVELS",
    "HeuristicJudge",
    "Judge",
    "JudgeKind",
    "JudgeRequest",
    "Judgement",
]
