"""Hand-built trajectories for judge and evaluator unit tests (no spans needed)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spanjudge.trajectory.model import SkillLoad, Stats, Trajectory, Turn
from spanjudge.trajectory.steps import CatalogueEntry, Step

SKILLS = Path(__file__).resolve().parents[2] / "fixtures" / "skills"
CATALOGUE = (
    CatalogueEntry(
        name="csv-report",
        description="Summarise a CSV file of sales figures into a markdown report with totals "
        "per region.",
    ),
    CatalogueEntry(
        name="release-notes",
        description="Draft release notes for a version from its merged pull requests, grouped "
        "by label.",
    ),
    CatalogueEntry(
        name="incident-triage",
        description="Triage a production incident from its alerts and logs and open a ticket.",
    ),
)


def body(skill: str) -> str | None:
    path = SKILLS / skill / "SKILL.md"
    return path.read_text(encoding="utf-8") if path.exists() else None


@dataclass(frozen=True)
class Load:
    skill: str
    status: str = "loaded"
    with_body: bool = True
    error: str | None = None


@dataclass(frozen=True)
class Tool:
    name: str
    arguments: Any = None
    result: str | None = "ok"
    failed: bool = False


@dataclass(frozen=True)
class Answer:
    text: str


@dataclass(frozen=True)
class NextTurn:
    request: str


def trajectory(
    request: str,
    *events: Load | Tool | Answer | NextTurn,
    catalogue: tuple[CatalogueEntry, ...] = CATALOGUE,
    complete: bool = True,
    session_id: str = "s1",
) -> Trajectory:
    """Steps in the given order, one span id each (``span-N``), turns split by `NextTurn`."""
    steps: list[Step] = []
    loads: list[SkillLoad] = []
    turns: list[tuple[str, str | None]] = [(request, None)]
    turn = 0
    steps.append(
        Step(
            kind="agent_turn",
            name="turn",
            span_id="span-0",
            trace_id="t",
            text=request,
            catalogue=catalogue,
            turn=0,
            start_unix_nano=0,
        )
    )
    for i, event in enumerate(events, start=1):
        span_id = f"span-{i}"
        common: dict[str, Any] = {
            "span_id": span_id,
            "trace_id": "t",
            "turn": turn,
            "start_unix_nano": i,
        }
        if isinstance(event, NextTurn):
            turn += 1
            turns.append((event.request, None))
            steps.append(
                Step(kind="agent_turn", name="turn", text=event.request, **{**common, "turn": turn})
            )
        elif isinstance(event, Load):
            text = body(event.skill) if event.with_body and event.status == "loaded" else None
            steps.append(
                Step(
                    kind="skill_load",
                    name="load_skill",
                    skill=event.skill,
                    skill_status=event.status,
                    skill_body=text,
                    error=event.error,
                    arguments={"name": event.skill},
                    result=text,
                    **common,
                )
            )
            loads.append(
                SkillLoad(
                    skill=event.skill,
                    status=event.status,
                    span_id=span_id,  # type: ignore[arg-type]
                    tool_name="load_skill",
                    body=text,
                    error=event.error,
                    turn=turn,
                )
            )
        elif isinstance(event, Tool):
            steps.append(
                Step(
                    kind="tool_call",
                    name=event.name,
                    arguments=event.arguments,
                    result=event.result,
                    status="error" if event.failed else "ok",
                    error="failed" if event.failed else None,
                    **common,
                )
            )
        else:
            steps.append(Step(kind="final_answer", name="final_answer", text=event.text, **common))
            turns[turn] = (turns[turn][0], event.text)
    final = turns[-1][1]
    return Trajectory(
        session_id=session_id,
        session_key_source="test",
        complete=complete,
        revision=1,
        close_reason="end_of_input" if complete else "idle_timeout",
        trace_ids=("t",),
        turns=tuple(
            Turn(
                index=i,
                span_id=f"turn-{i}",
                trace_id="t",
                request=req,
                final_answer=ans,
                agent_name="agent",
                start_unix_nano=0,
                end_unix_nano=0,
            )
            for i, (req, ans) in enumerate(turns)
        ),
        steps=tuple(steps),
        skill_loads=tuple(loads),
        catalogue=catalogue,
        final_answer=final,
        stats=Stats(
            turns=len(turns),
            tool_calls=0,
            skill_loads=len(loads),
            model_calls=0,
            input_tokens=None,
            output_tokens=None,
            duration_s=0.0,
            errors=0,
            retries=0,
            backtracks=0,
        ),
    )


CSV_REQUEST = "Please summarise sales.csv into a report with the totals per region."
RELEASE_REQUEST = "Write the release notes for version 2.4 from the merged pull requests."

CSV_FOLLOWED = (
    Load("csv-report"),
    Tool("read_csv", {"path": "sales.csv"}, "region,amount\nnorth,10\nsouth,32"),
    Tool("calculate", {"expression": "10+32"}, "42"),
    Tool("write_file", {"path": "out/report.md", "content": "..."}),
    Answer("The grand total is 42; the report is in out/report.md."),
)
CSV_SKIPPED = (  # step 2 (calculate) skipped
    Load("csv-report"),
    Tool("read_csv", {"path": "sales.csv"}, "region,amount\nnorth,10\nsouth,32"),
    Tool("write_file", {"path": "out/report.md", "content": "..."}),
    Answer("The grand total is 42; the report is in out/report.md."),
)
CSV_REORDERED_SKIPPED = (  # write before read, calculate skipped
    Load("csv-report"),
    Tool("write_file", {"path": "out/report.md", "content": "..."}),
    Tool("read_csv", {"path": "sales.csv"}, "region,amount\nnorth,10\nsouth,32"),
    Answer("The grand total is 42."),
)
