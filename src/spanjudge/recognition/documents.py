"""Every SKILL.md document in one tool result is a load of its skill (ARCHITECTURE.md section 2).

`cat skills/*/SKILL.md`, or one `cat` of two paths, prints several SKILL.md documents in one
result. `evidence.tool_step` reads the call as a load of one skill; this session pass splits its
body per document: the step keeps its own skill's document, and each further skill goes to
`Step.also_loaded`, which session assembly turns into one more `skill_loads` entry (same span and
call; `stats.skill_loads` counts each skill, `stats.tool_calls` and the steps still show the call
once).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from spanjudge.recognition.evidence import front_matter_name
from spanjudge.trajectory.steps import Step

_FENCES = ("```", "~~~")
_FRONT_MATTER_LINES = 60  # a front matter block longer than this is not one


def skill_documents(text: str) -> list[tuple[int, str]]:
    """(offset, name) of each SKILL.md document in ``text``: a `---` line opening front matter
    with a `name:` and a `description:`. Front matter quoted in a fenced code block (a skill that
    shows how to write one) starts no document."""
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    found: list[tuple[int, str]] = []
    fenced = False
    i = 0
    while i < len(lines):
        bare = lines[i].rstrip()
        if bare.startswith(_FENCES):
            fenced = not fenced
        elif bare == "---" and not fenced:
            end = min(len(lines), i + _FRONT_MATTER_LINES)
            close = next((j for j in range(i + 1, end) if lines[j].rstrip() == "---"), None)
            name = front_matter_name("".join(lines[i : close + 1])) if close else None
            if close is not None and name:
                found.append((offsets[i], name))
                i = close + 1
                continue
        i += 1
    return found


def each_document(steps: Sequence[Step]) -> list[Step]:
    """The session's steps, a loaded body that holds several SKILL.md documents split per skill."""
    return [_split(s) if _several(s) else s for s in steps]


def _several(step: Step) -> bool:
    body = step.skill_body
    return (
        step.kind == "skill_load"
        and step.skill_status == "loaded"
        and body is not None
        and body.count("name:") > 1
        and body.count("---") > 3
    )


def _split(step: Step) -> Step:
    body = step.skill_body or ""
    starts = skill_documents(body)
    documents: dict[str, str] = {}
    for k, (start, name) in enumerate(starts):
        end = starts[k + 1][0] if k + 1 < len(starts) else len(body)
        # the first document keeps what precedes it (a header the harness printed)
        documents.setdefault(name, body[0 if k == 0 else start : end])
    if len(documents) < 2:
        return step
    own = documents.pop(step.skill or "", None)
    return replace(
        step,
        skill_body=own if own is not None else step.skill_body,
        also_loaded=tuple(documents.items()),
    )
