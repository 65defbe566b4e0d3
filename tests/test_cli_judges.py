"""`spanjudge eval` with an OpenAI-compatible judge named in the configuration: verdicts come
from that endpoint, and a dead endpoint gives `judge_error` verdicts, never a crash or a pass."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from spanjudge.cli import main
from tests.judges.chat_server import chat_server, completion
from tests.support.judged import TRACES, config

SESSION = "strands-default-wrong-skill"


def evaluate(capsys: pytest.CaptureFixture[str], cfg: Path) -> tuple[int, dict[str, Any]]:
    code = main(["eval", str(TRACES), "--config", str(cfg), "--format", "json"])
    out, _ = capsys.readouterr()
    report = json.loads(out)
    [session] = [s for s in report["sessions"] if s["session_id"] == SESSION]
    return code, session


def selection(session: dict[str, Any]) -> list[dict[str, Any]]:
    return [v for v in session["verdicts"] if v["evaluator"] == "skill_selection"]


def test_configured_endpoint_judges_skill_selection(capsys, tmp_path) -> None:  # type: ignore[no-untyped-def]
    answer = json.dumps({"rating": "no", "rationale": "release notes were asked for"})
    # every session with a skill load asks once; answer them all the same way
    with chat_server(*[completion(answer)] * 200) as server:
        _, session = evaluate(capsys, config(tmp_path, server.base_url))
        asked = len(server.requests)
    [verdict] = selection(session)
    assert verdict["judge"] == "llm:scripted-judge"
    assert (verdict["outcome"], verdict["label"]) == ("fail", "no")
    assert "release notes were asked for" in verdict["explanation"]
    assert asked > 0
    # evaluators not pointed at the endpoint keep the embedded heuristic judge
    following = [v for v in session["verdicts"] if v["evaluator"] == "instruction_following"]
    assert following and all(v["judge"] == "heuristic" for v in following)


def test_dead_endpoint_gives_judge_error_not_a_crash(capsys, tmp_path) -> None:  # type: ignore[no-untyped-def]
    with chat_server() as server:
        url = server.base_url
    # the server is gone: every call is refused
    code, session = evaluate(capsys, config(tmp_path, url))
    [verdict] = selection(session)
    assert verdict["outcome"] == "not_evaluated" and verdict["reason"] == "judge_error"
    assert verdict["score"] is None and verdict["error_type"]
    assert code == 1  # other sessions fail on skill_loaded; the judge error itself is no pass


JUDGED = {"skill_selection", "skill_omission", "instruction_following", "outcome"}


def test_without_configuration_eval_and_the_processor_use_the_heuristic_judge(capsys) -> None:  # type: ignore[no-untyped-def]
    from spanjudge.demo import run_demo

    main(["eval", str(TRACES), "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    offline = [v for s in report["sessions"] for v in s["verdicts"] if v["evaluator"] in JUDGED]
    results, _ = run_demo()  # the in-process processor on the bundled agent
    online = [v for r in results for v in r.verdicts if v.evaluator in JUDGED]
    assert {v["evaluator"] for v in offline} == {v.evaluator for v in online} == JUDGED
    assert {v["judge"] for v in offline} == {v.judge for v in online} == {"heuristic"}
