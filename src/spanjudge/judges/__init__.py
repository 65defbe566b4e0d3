"""Judges: the heuristic default, OpenAI-compatible and Bedrock LLM judges (see ``registry`` for
the configuration)."""

from __future__ import annotations

from spanjudge.judges.base import LEVELS, Judge, JudgeKind, Judgement, JudgeRequest
from spanjudge.judges.heuristic import HEURISTIC, HeuristicJudge

__all__ = [
    "HEURISTIC",
    "LEVELS",
    "HeuristicJudge",
    "Judge",
    "JudgeKind",
    "JudgeRequest",
    "Judgement",
]
