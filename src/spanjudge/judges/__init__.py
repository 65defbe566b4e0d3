"""Judges: the heuristic default, OpenAI-compatible and Bedrock LLM judges (see ``registry`` for
the configuration)."""

from __future__ import annotations

from spanjudge.judges.base import LEVELS, Judgement, JudgeRequest
from spanjudge.judges.heuristic import HEURISTIC, HeuristicJudge
from spanjudge.typenames import module_getattr

TYPE_CHECKING = False
if TYPE_CHECKING:
    from spanjudge.judges.protocols import Judge as Judge
    from spanjudge.judges.protocols import JudgeKind as JudgeKind

# names bound for type checkers only (the Protocols: they need `typing`), given when asked
__getattr__ = module_getattr(__name__)

__all__ = [
    "HEURISTIC",
    "LEVELS",
    "HeuristicJudge",
    "Judge",
    "JudgeKind",
    "JudgeRequest",
    "Judgement",
]
