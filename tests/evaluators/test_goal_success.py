"""`goal_success`: natural-language assertions from the expectations, each judged by a scripted
OpenAI-compatible server, through `spanjudge eval` as a user runs it."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from tests.judges.chat_server import block, chat_server, completion
from tests.support.judged_runs import MULTI_TURN, run_eval, verdicts

SAVED = "a report file was saved"
WEATHER = "the user was told the weather in Oslo"
EMAILED = "the report was emailed to the user"


def assertion_judge(payload: dict[str, Any]) -> Any:
    """Answers each assertion from the evidence shown, citing the step it rests on."""
    user = next(m["content"] for m in payload["messages"] if m["role"] == "user")
    assert user.startswith("QUESTION (goal_success")
    rows = json.loads(block(payload, "TRAJECTORY") or "[]")

    def cite(tool: str) -> list[int]:
        return [r["i"] for r in rows if r.get("name") == tool]

    if SAVED in user:
        body = {
            "rating": "holds",
            "rationale": "write_file saved it",
            "evidence": cite("write_file"),
        }
    elif WEATHER in user:
        body = {"rating": "holds", "rationale": "7 °C, rain", "evidence": cite("get_weather")}
    else:
        body = {"rating": "does_not_hold", "rationale": "no email was sent", "evidence": []}
    return completion(json.dumps(body), prompt_tokens=150, completion_tokens=25)


def _config(base_url: str) -> dict[str, Any]:
    return {
        "judges": {"llm": {"type": "openai", "base_url": base_url, "model": "scripted"}},
        "evaluators": {"goal_success": {"judge": "llm"}},
    }


def _expect(*assertions: str) -> dict[str, Any]:
    return {"sessions": {MULTI_TURN: {"assertions": list(assertions)}}}


def test_each_assertion_is_judged_and_all_must_hold(tmp_path: Path) -> None:
    with chat_server(responder=assertion_judge) as server:
        report = run_eval(
            tmp_path, _config(server.base_url), MULTI_TURN, expect=_expect(SAVED, WEATHER, EMAILED)
        )
        assert len(server.requests) == 3  # one question per assertion
    (session,) = report["sessions"]
    assert session["expectation_sources"] == ["expectations_file"]
    spans = {s["name"]: s["span_id"] for s in session["steps"] if s["kind"] == "tool_call"}
    (verdict,) = verdicts(report, "goal_success")
    assert (verdict["outcome"], verdict["label"]) == ("fail", "not_achieved")
    assert verdict["score"] == pytest.approx(2 / 3)
    assert verdict["judge"] == "llm:scripted"
    # a verdict on the whole session, as a custom session-level one: no turn
    assert verdict["target"].get("turn") is None and verdict["target"]["span_id"]
    rows = verdict["details"]["assertions"]
    assert [(r["assertion"], r["judgement"]) for r in rows] == [
        (SAVED, "holds"),
        (WEATHER, "holds"),
        (EMAILED, "does_not_hold"),
    ]
    assert rows[0]["evidence"] == [spans["write_file"]]
    assert rows[1]["evidence"] == [spans["get_weather"]]
    assert rows[2]["evidence"] == [] and rows[2]["rationale"] == "no email was sent"
    assert "2 of 3 assertions hold" in verdict["explanation"]
    usage = verdict["details"]["judge_usage"]
    assert (usage["calls"], usage["input_tokens"], usage["output_tokens"]) == (3, 450, 75)


def test_a_session_passes_when_every_assertion_holds(tmp_path: Path) -> None:
    with chat_server(responder=assertion_judge) as server:
        report = run_eval(
            tmp_path, _config(server.base_url), MULTI_TURN, expect=_expect(SAVED, WEATHER)
        )
    (verdict,) = verdicts(report, "goal_success")
    assert (verdict["outcome"], verdict["score"], verdict["label"]) == ("pass", 1.0, "achieved")


def test_assertions_from_a_config_rule_reach_the_sessions_it_matches(tmp_path: Path) -> None:
    with chat_server(responder=assertion_judge) as server:
        config = {
            **_config(server.base_url),
            "expectations": [{"when": {"request_matches": "weather"}, "assertions": [WEATHER]}],
        }
        report = run_eval(tmp_path, config, MULTI_TURN, "genai-manual-wrong-skill")
    by_session = {
        s["session_id"]: [v for v in s["verdicts"] if v["evaluator"] == "goal_success"]
        for s in report["sessions"]
    }
    assert [v["outcome"] for v in by_session[MULTI_TURN]] == ["pass"]
    [other] = by_session["genai-manual-wrong-skill"]
    assert (other["outcome"], other["reason"]) == ("not_evaluated", "no_expectation")


def test_without_an_llm_judge_assertions_are_no_judge_and_said_at_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="spanjudge"):
        report = run_eval(tmp_path, {}, MULTI_TURN, expect=_expect(SAVED))
    (verdict,) = verdicts(report, "goal_success")
    assert (verdict["outcome"], verdict["reason"]) == ("not_evaluated", "no_judge")
    warned = [r.getMessage() for r in caplog.records if "no LLM judge" in r.getMessage()]
    assert len(warned) == 1 and "goal_success" in warned[0]


def test_goal_success_stays_off_until_an_assertion_is_written(tmp_path: Path) -> None:
    report = run_eval(tmp_path, {}, MULTI_TURN)
    assert verdicts(report, "goal_success") == []


def test_an_unknown_evidence_item_is_named_with_a_suggestion() -> None:
    from spanjudge.config import parse_config
    from spanjudge.errors import ConfigError

    with pytest.raises(ConfigError) as info:
        parse_config({"evaluators": {"goal_success": {"evidence": ["answers", "request"]}}})
    assert any(
        p.startswith("evaluators.goal_success.evidence: unknown evidence 'answers' (did you mean "
                     "'answer'?)")
        for p in info.value.problems
    ), info.value.problems  # fmt: skip
