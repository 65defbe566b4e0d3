"""Bounded metric label values: configured names always pass, a cap per label for the rest
(reported as `other`), names whose series expired give their place back, and a long value is
cut to `MAX_LABEL_CHARS` plus a hash of the whole (so two long names stay two series)."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterable
from typing import Any

from spanjudge import semconv
from spanjudge.values import SessionResult, skill_key

log = logging.getLogger("spanjudge")
OTHER = "other"
# Every series repeats its label values in each scrape: a name sent by an agent must not be able
# to make one series as large as the name.
MAX_LABEL_CHARS = 128


def cap_label(value: str) -> str:
    """``value``, or its first `MAX_LABEL_CHARS` characters, an ellipsis and a short hash of the
    whole when it is longer."""
    if len(value) <= MAX_LABEL_CHARS:
        return value
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{value[:MAX_LABEL_CHARS]}…{digest}"


class LabelBudget:
    """Bounds one label's values: configured names always pass (in the configured spelling);
    up to ``cap`` other names are admitted, first come, for the life of the process; anything
    after that is `other`. A name sent by an agent must not be able to mint a new series."""

    def __init__(
        self,
        label: str,
        configured: Iterable[str] = (),
        cap: int = 100,
        on_cut: Callable[[int], object] | None = None,
    ) -> None:
        self.label = label
        self.on_cut = on_cut  # told of each value longer than MAX_LABEL_CHARS
        self.configured = {skill_key(s): s.strip() for s in configured if s.strip()}
        self.cap = cap
        self._admitted: dict[str, str] = {}
        self.overflowed = 0

    def __call__(self, value: str, spelling: str | None = None, calls: int = 1) -> str:
        """``value``'s label; ``calls``: how many uses of it this stands for (each one a value
        cut, or over the cap, is counted)."""
        if len(value) > MAX_LABEL_CHARS:
            if self.on_cut is not None:
                self.on_cut(calls)
            value = cap_label(value)
            spelling = cap_label(spelling) if spelling is not None else None
        key = skill_key(value)
        found = self.configured.get(key) or self._admitted.get(key)
        if found is not None:
            return found
        if len(self._admitted) < self.cap:
            self._admitted[key] = (spelling or value).strip()
            return self._admitted[key]
        if not self.overflowed:
            log.warning(
                "metric label %s has %d distinct values, its cap: further ones are reported as"
                " %r (list the names that matter under labels.%s, or raise labels.max_values)",
                self.label,
                self.cap,
                OTHER,
                "agents" if self.label == semconv.GEN_AI_AGENT_NAME else "skills",
            )
        self.overflowed += calls
        return OTHER

    def release(self, live: set[str]) -> None:
        """Forget admitted names that no series carries any more (their series expired)."""
        for key, name in list(self._admitted.items()):
            if name not in live:
                del self._admitted[key]


class SkillLabels:
    """Bounds `gen_ai.skill.name` label values: a skill outside the configured `labels.skills`,
    the session's expectations and its catalogue is `other`; the ones the session itself names
    (its catalogue, `spanjudge.expected_skills`: both sent by the agent) share a cap."""

    def __init__(
        self,
        configured: Iterable[str] = (),
        cap: int = 100,
        on_cut: Callable[[int], object] | None = None,
    ) -> None:
        self.budget = LabelBudget(semconv.GEN_AI_SKILL_NAME, configured, cap, on_cut)

    def __call__(self, skill: str, spelling: str | None, calls: int = 1) -> str:
        """The label of ``skill``, named by its session in ``spelling`` (None: the session did
        not name it); ``calls`` as `LabelBudget`'s. Matched case-insensitively, emitted in the
        spelling the configuration, expectation or catalogue uses (the same as on the span
        events and log records)."""
        key = skill_key(skill)
        if not key:
            return OTHER
        budget = self.budget
        if key in budget.configured:
            return budget.configured[key]
        return budget(skill, spelling, calls) if spelling is not None else OTHER


def session_skills(result: SessionResult) -> dict[str, str]:
    """The skills a session names (its expectations, then its catalogue): `skill_key` -> the
    spelling its labels use."""
    named: dict[str, str] = {}
    for name in (*result.expectation.skills, *(e.name for e in result.trajectory.catalogue)):
        named.setdefault(skill_key(name), name.strip())
    return named


def label_budgets(
    meter: Any, skills: Iterable[str], agents: Iterable[str], cap: int
) -> tuple[SkillLabels, LabelBudget]:
    """The skill and the agent label budgets, their cut values counted on ``meter``."""
    cut = meter.create_counter(
        semconv.M_LABEL_VALUES_CUT,
        unit="{value}",
        description=f"Agent and skill names longer than {MAX_LABEL_CHARS} characters, cut",
    )
    return (
        SkillLabels(skills, cap, cut.add),
        LabelBudget(semconv.GEN_AI_AGENT_NAME, agents, cap, cut.add),
    )
