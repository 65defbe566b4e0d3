"""A verdict whose details refer to themselves (a plugin evaluator's) cannot be written as JSON:
the command says what `json.dumps` says of it, as it always did, not a recursion error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from spanjudge.cli import main
from spanjudge.evaluators.skill_loaded import SkillLoaded
from spanjudge.values import Verdict
from tests.conftest import recorded, write_jsonl
from tests.support.sessions import agent_turn


def _cyclic_details(self: Any, ctx: Any) -> list[Verdict]:
    details: dict[str, Any] = {"checked": 1}
    details["again"] = details
    return [
        Verdict(
            evaluator="skill_loaded",
            outcome="pass",
            score=1.0,
            label="ok",
            explanation="plugin-style details",
            details=details,
        )
    ]


def test_a_verdict_with_cyclic_details_is_reported_as_json_dumps_reports_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    traces = write_jsonl(tmp_path / "t.jsonl", recorded(lambda t: agent_turn(t, "s-1")))
    monkeypatch.setattr(SkillLoaded, "evaluate", _cyclic_details)
    cyclic: dict[str, Any] = {}
    cyclic["again"] = cyclic
    with pytest.raises(ValueError) as said:
        json.dumps(cyclic, ensure_ascii=False, default=str)
    status = main(["eval", str(traces), "-q", "--format", "json", "-o", str(tmp_path / "r.json")])
    err = capsys.readouterr().err
    assert status == 3, err
    assert f"internal error: ValueError: {said.value}" in err
    assert "RecursionError" not in err
