"""The `judges` section: validation, per-evaluator choice, the heuristic default."""

from __future__ import annotations

from typing import Any

import pytest

from spanjudge.config import Config
from spanjudge.errors import ConfigError
from spanjudge.judges.heuristic import HEURISTIC
from spanjudge.judges.openai import OpenAIJudge
from spanjudge.judges.registry import judge_lookup, parse_judges

LOCAL = {"type": "openai", "base_url": "http://127.0.0.1:8000/v1", "model": "qwen2.5"}


def lookup(judges: dict[str, Any], evaluators: dict[str, Any]) -> Any:
    return judge_lookup(Config(judges=judges, evaluators=evaluators))


def test_no_configuration_means_the_heuristic_judge_for_the_judged_evaluators() -> None:
    find = lookup({}, {})
    for name in ("skill_selection", "skill_omission", "instruction_following", "outcome"):
        assert find(name) is HEURISTIC
    assert find("cost") is None


def test_an_evaluator_can_name_an_openai_judge() -> None:
    find = lookup({"local-llm": LOCAL}, {"skill_selection": {"judge": "local-llm"}})
    judge = find("skill_selection")
    assert isinstance(judge, OpenAIJudge)
    assert judge.name == "llm:qwen2.5"
    assert judge.url == "http://127.0.0.1:8000/v1/chat/completions"
    assert find("instruction_following") is HEURISTIC


def test_a_judge_named_default_switches_all_four() -> None:
    find = lookup({"default": LOCAL}, {"outcome": {"judge": "heuristic"}})
    assert find("skill_selection").name == "llm:qwen2.5"
    assert find("skill_omission") is find("instruction_following") is find("skill_selection")
    assert find("outcome") is HEURISTIC


def test_unknown_judge_reference_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as info:
        lookup({}, {"outcome": {"judge": "gpt"}})
    assert "evaluators.outcome.judge: unknown judge 'gpt' (known: heuristic)" in str(info.value)


def test_every_problem_is_reported_at_once() -> None:
    problems: list[str] = []
    parse_judges(
        {
            "a": {"type": "openai", "model": "m", "timeout_s": -1, "json_mode": "yes"},
            "b": {"type": "gemini"},
            "c": {"type": "openai", "base_url": "ftp://x", "model": "m", "colour": "red"},
            "heuristic": {"type": "heuristic"},
        },
        "judges",
        problems,
    )
    assert problems == [
        "judges.a.timeout_s: expected at least 0.001, got -1",
        "judges.a.json_mode: expected true or false, got 'yes'",
        "judges.a.base_url: required for type openai",
        "judges.b.type: expected one of heuristic, openai, bedrock, got 'gemini'",
        "judges.c.colour: unknown setting for type openai (known: base_url, model, "
        "api_key_env, json_mode, timeout_s, deadline_s, max_retries, backoff_s, concurrency, "
        "cache_size, cooldown_s, max_tokens, temperature, price, budget)",
        "judges.c.base_url: expected an http:// or https:// URL, got 'ftp://x'",
        "judges.heuristic: 'heuristic' is built in; choose another name",
    ]


def test_a_price_on_the_heuristic_judge_says_that_prices_are_for_llm_judges() -> None:
    problems: list[str] = []
    parse_judges({"plain": {"type": "heuristic", "price": {}}}, "judges", problems)
    assert problems == [
        "judges.plain.price: unknown setting for type heuristic (known: none); price and "
        "budget apply to LLM judges (types openai, bedrock): the heuristic judge makes no "
        "calls and costs nothing"
    ]


def test_policy_settings_reach_the_judge() -> None:
    spec = {**LOCAL, "timeout_s": 2, "max_retries": 0, "concurrency": 1, "json_mode": False}
    judge = lookup({"x": spec}, {"outcome": {"judge": "x"}})("outcome")
    assert isinstance(judge, OpenAIJudge)
    assert (judge.policy.timeout_s, judge.policy.max_retries, judge.policy.concurrency) == (2, 0, 1)
    assert judge.json_mode is False
