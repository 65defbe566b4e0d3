"""Skills from a configured directory (Agent Skills SKILL.md format): names and bodies the trace
did not record, and every configuration problem reported at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from spanjudge.config import parse_config
from spanjudge.errors import ConfigError
from tests.conftest import FIXTURES
from tests.recognition.agent_spans import Call, agent_run, loads, trajectory_of

SKILLS = {"skills": {"paths": [str(FIXTURES / "skills")]}}


def _body(name: str) -> str:
    return (FIXTURES / "skills" / name / "SKILL.md").read_text().split("---", 2)[2].strip()


def test_a_load_whose_trace_has_no_body_takes_it_from_the_directory() -> None:
    lazy = Call("load_skill", {"skill_name": "csv-report"}, {"status": "loaded"})
    trajectory = trajectory_of(lambda t: agent_run(t, "Report.", [lazy]), SKILLS)
    assert loads(trajectory) == [("csv-report", "loaded")]
    load = trajectory.skill_loads[0]
    assert (load.body, load.body_source) == (_body("csv-report"), "directory")
    # the trace offered no catalogue: the directory's skills are the offer
    assert {e.name for e in trajectory.catalogue} == {
        "csv-report",
        "incident-triage",
        "release-notes",
    }


def test_a_known_skill_body_in_any_tool_result_is_a_load_of_that_skill() -> None:
    guide = Call("get_guide", {"topic": "sales"}, "Here you go:\n\n" + _body("csv-report"))
    trajectory = trajectory_of(lambda t: agent_run(t, "Report.", [guide]), SKILLS)
    assert loads(trajectory) == [("csv-report", "loaded")]
    assert trajectory.skill_loads[0].body_source == "trace"
    # without the directory nothing says that text is a skill
    assert loads(trajectory_of(lambda t: agent_run(t, "Report.", [guide]))) == []


def test_every_problem_of_the_skills_section_is_reported_at_once(tmp_path: Path) -> None:
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "SKILL.md").write_text("# no front matter\n")
    (tmp_path / "nameless").mkdir()
    (tmp_path / "nameless" / "SKILL.md").write_text("---\ndescription: x\n---\nbody\n")
    (tmp_path / "empty").mkdir()
    doc = {
        "skills": {
            "paths": [str(tmp_path / "missing"), str(tmp_path / "empty"), str(tmp_path)],
            "path": "x",
        }
    }
    with pytest.raises(ConfigError) as info:
        parse_config(doc)
    problems = info.value.problems
    assert any(p.startswith("skills.path: unknown setting") for p in problems)
    assert any(p.startswith("skills.paths[0]:") and "is not a directory" in p for p in problems)
    assert any(p.startswith("skills.paths[1]:") and "no SKILL.md" in p for p in problems)
    assert any("broken/SKILL.md: no YAML front matter" in p for p in problems)
    assert any("nameless/SKILL.md: front matter has no `name`" in p for p in problems)
    assert len(problems) == 5, problems


def test_a_directory_body_lets_instruction_following_be_judged_and_coverage_says_so() -> None:
    from spanjudge.engine import Engine
    from spanjudge.sessions.store import ClosedSession
    from spanjudge.spans.sdk import span_from_sdk
    from tests.conftest import recorded

    lazy = Call("load_skill", {"skill_name": "csv-report"}, {"status": "loaded"})
    read = Call("read_csv", {"path": "data/sales.csv"}, "region,amount\nnorth,1")

    def body(tracer):  # type: ignore[no-untyped-def]
        agent_run(tracer, "Report.", [lazy, read])

    spans = tuple(span_from_sdk(s) for s in recorded(body))
    closed = ClosedSession(key="s", key_source="t", revision=1, reason="end_of_input", spans=spans)
    config = parse_config(
        {**SKILLS, "expectations": [{"when": {"request_matches": "."}, "skills": ["csv-report"]}]}
    )
    results = {}
    for name, engine in (("directory", Engine(config)), ("none", Engine())):
        result = engine.evaluate(closed)
        verdicts = [v for v in result.verdicts if v.evaluator == "instruction_following"]
        results[name] = (result.coverage.bodies_from_directory, [v.reason for v in verdicts])
    assert results["directory"][0] == 1 and "body_not_recorded" not in results["directory"][1]
    assert results["none"] == (0, ["body_not_recorded"])
