"""Skills known from configured directories (parsed by `spanjudge.recognition.skills_dir`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from spanjudge.trajectory.steps import SKILLS_DIRECTORY, CatalogueEntry

# A body is recognised in a result by its opening text, whitespace-normalised.
_PROBE_CHARS = 160


@dataclass(frozen=True, slots=True, kw_only=True)
class Skill:
    """One SKILL.md: its front matter's name and description, its body and where it lives."""

    name: str
    description: str | None
    body: str
    path: str

    @property
    def probe(self) -> str:
        return " ".join(self.body.split())[:_PROBE_CHARS]


@dataclass(frozen=True, slots=True, kw_only=True)
class SkillLibrary:
    """Every skill found under the configured paths, by name."""

    skills: Mapping[str, Skill] = field(default_factory=dict)
    paths: tuple[str, ...] = ()

    def get(self, name: str | None) -> Skill | None:
        return self.skills.get(name) if name else None

    def catalogue(self) -> tuple[CatalogueEntry, ...]:
        return tuple(
            CatalogueEntry(name=s.name, description=s.description, source=SKILLS_DIRECTORY)
            for s in self.skills.values()
        )

    def skill_in(self, text: str | None) -> Skill | None:
        """The library skill whose body ``text`` carries, if any."""
        if not text or not self.skills:
            return None
        flat = " ".join(text.split())
        for skill in self.skills.values():
            if skill.probe and skill.probe in flat:
                return skill
        return None


EMPTY_LIBRARY = SkillLibrary()
