"""Judge cost and hourly budget (`judges.<name>.price`, `.budget`) against a scripted
OpenAI-compatible server whose every reply reports a fixed token usage."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from spanjudge import CollectingSink, semconv
from spanjudge.config import parse_config
from spanjudge.engine import Engine
from spanjudge.errors import ConfigError, JudgeError
from spanjudge.judges.base import Criterion, JudgeRequest, ScalePoint
from spanjudge.judges.budget import WINDOW_S, Budget, Price
from spanjudge.judges.openai import OpenAIJudge
from spanjudge.judges.reliability import CallCore, CallPolicy, Reply
from spanjudge.offline import run_offline
from tests.conftest import FIXTURES
from tests.judges.chat_server import chat_server, completion
from tests.support.judged_runs import run_eval, verdicts

TRACES = FIXTURES / "genai_manual" / "genai_manual.jsonl"
# Every reply of the scripted judge reports this usage.
TOKENS_IN, TOKENS_OUT = 200, 30
# Price per million tokens.
PRICE_IN, PRICE_OUT = 2.5, 10.0
CRITERION = {
    "name": "polite",
    "instructions": "Is the final answer polite?",
    "scale": [{"label": "polite", "score": 1}, {"label": "rude", "score": 0}],
    "judge": "llm",
}
# Deterministic evaluators: they never ask a judge.
DETERMINISTIC = ("skill_loaded", "trajectory_validity", "side_effects", "cost", "robustness")


def polite(payload: dict[str, Any]) -> Any:
    body = {"rating": "polite", "rationale": "it says please", "evidence": []}
    return completion(json.dumps(body), prompt_tokens=TOKENS_IN, completion_tokens=TOKENS_OUT)


def _judges(base_url: str, **extra: Any) -> dict[str, Any]:
    # concurrency 1: one call at a time, so no second call starts before the first is counted;
    # no cache: sessions asking the same question would be answered free from it
    return {
        "llm": {
            "type": "openai",
            "base_url": base_url,
            "model": "scripted",
            "concurrency": 1,
            "cache_size": 0,
            **extra,
        }
    }


def _report(tmp_path: Path, config: dict[str, Any]) -> Any:
    ids = [
        s["session_id"]
        for s in json.loads((FIXTURES / "genai_manual" / "scenarios.json").read_text())["sessions"]
    ]
    return run_eval(tmp_path, config, *ids)


def test_the_budget_stops_judging_at_its_tokens_and_deterministic_verdicts_go_on(
    tmp_path: Path,
) -> None:
    budget = 500
    per_call = TOKENS_IN + TOKENS_OUT
    # A call starts while the window's use is below the budget: calls until it is reached.
    allowed = -(-budget // per_call)
    judged_dir, plain_dir = tmp_path / "judged", tmp_path / "plain"
    judged_dir.mkdir()
    plain_dir.mkdir()
    with chat_server(responder=polite) as server:
        config = {
            "judges": _judges(server.base_url, budget={"tokens_per_hour": budget}),
            "evaluators": {"custom": [CRITERION]},
        }
        report = _report(judged_dir, config)
        assert len(server.requests) == allowed
    sessions = len(report["sessions"])
    assert sessions > allowed
    judged = verdicts(report, "polite")
    outcomes = [(v["outcome"], v["reason"]) for v in judged]
    assert outcomes.count(("pass", None)) == allowed
    assert outcomes.count(("not_evaluated", "judge_budget")) == sessions - allowed
    refused = next(v for v in judged if v["reason"] == "judge_budget")
    assert f"its budget of {budget} tokens per hour is spent" in refused["explanation"]
    # A spent budget is a coverage gap, not something left unconfigured.
    assert report["summary"]["by_evaluator"]["polite"]["coverage"] == pytest.approx(
        allowed / sessions
    )
    plain = _report(plain_dir, {})

    def deterministic(doc: Any) -> list[Any]:
        return [
            (s["session_id"], v["evaluator"], v["outcome"], v["score"], v["reason"])
            for s in doc["sessions"]
            for v in s["verdicts"]
            if v["evaluator"] in DETERMINISTIC
        ]

    assert deterministic(report) == deterministic(plain)
    assert {v[2] for v in deterministic(report)} >= {"pass", "fail"}  # they judged


def test_cost_is_the_priced_token_count_per_verdict_and_in_the_totals(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    price = {"input_per_million": PRICE_IN, "output_per_million": PRICE_OUT}
    per_call = (TOKENS_IN * PRICE_IN + TOKENS_OUT * PRICE_OUT) / 1_000_000
    with chat_server(responder=polite) as server:
        config = {
            "judges": _judges(server.base_url, price=price),
            "evaluators": {"custom": [CRITERION]},
        }
        report = _report(tmp_path, config)
        calls = len(server.requests)
    judged = verdicts(report, "polite")
    assert calls == len(judged) > 1
    for verdict in judged:
        usage = verdict["details"]["judge_usage"]
        assert (usage["calls"], usage["input_tokens"], usage["output_tokens"]) == (
            1,
            TOKENS_IN,
            TOKENS_OUT,
        )
        assert usage["cost"] == pytest.approx(per_call)
        assert usage["latency_s"] >= 0
    totals = report["summary"]["judge_usage"]
    for total in (totals["by_evaluator"]["polite"], totals["by_judge"]["llm:scripted"]):
        assert total["calls"] == calls
        assert total["input_tokens"] == calls * TOKENS_IN
        assert total["output_tokens"] == calls * TOKENS_OUT
        assert total["cost"] == pytest.approx(calls * per_call)
    assert set(totals["by_evaluator"]) == {"polite"}  # deterministic ones cost nothing


def _without_usage(payload: dict[str, Any]) -> Any:
    """A reply as from an endpoint that reports no token usage."""
    reply = polite(payload)
    del reply.body["usage"]
    return reply


def test_an_endpoint_reporting_no_usage_is_estimated_and_still_bounded_by_the_budget(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    price = {"input_per_million": PRICE_IN, "output_per_million": PRICE_OUT}
    budget = 4000  # a few calls of a prompt of some thousands of characters
    with chat_server(responder=_without_usage) as server:
        config = {
            "judges": _judges(server.base_url, price=price, budget={"tokens_per_hour": budget}),
            "evaluators": {"custom": [CRITERION]},
        }
        with caplog.at_level("WARNING", logger="spanjudge"):
            report = _report(tmp_path, config)
        prompts = [
            sum(len(m["content"]) for m in payload["messages"]) for payload in server.requests
        ]
    judged = verdicts(report, "polite")
    asked = [v for v in judged if v["outcome"] == "pass"]
    refused = [v for v in judged if v["reason"] == "judge_budget"]
    # The budget cut judging off: the estimated tokens counted against it.
    assert asked and refused and len(asked) + len(refused) == len(judged)
    assert len(prompts) == len(asked)
    answer = len(json.dumps({"rating": "polite", "rationale": "it says please", "evidence": []}))
    for verdict, chars in zip(asked, prompts, strict=True):
        usage = verdict["details"]["judge_usage"]
        assert usage["estimated"] is True
        # about a token per 4 characters of the prompt and the reply
        assert usage["input_tokens"] == pytest.approx(chars / 4, abs=1)
        assert usage["output_tokens"] == pytest.approx(answer / 4, abs=1)
        assert usage["cost"] > 0  # never reported as free
    assert sum(v["details"]["judge_usage"]["input_tokens"] for v in asked[:-1]) < budget
    total = report["summary"]["judge_usage"]["by_judge"]["llm:scripted"]
    assert total["estimated"] is True and total["cost"] > 0
    warned = [r.getMessage() for r in caplog.records if "reports no token usage" in r.getMessage()]
    assert len(warned) == 1 and "llm" in warned[0]


def test_the_table_totals_judge_usage_per_evaluator_and_judge(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from spanjudge.cli import main

    price = {"input_per_million": PRICE_IN, "output_per_million": PRICE_OUT}
    traces = tmp_path / "traces.jsonl"
    lines = TRACES.read_text().splitlines()
    traces.write_text("\n".join(x for x in lines if "genai-manual-multi-turn" in x) + "\n")
    with chat_server(responder=polite) as server:
        cfg = tmp_path / "spanjudge.json"
        cfg.write_text(
            json.dumps(
                {
                    "judges": _judges(server.base_url, price=price),
                    "evaluators": {"custom": [CRITERION]},
                }
            )
        )
        main(["eval", str(traces), "--config", str(cfg)])
    out = capsys.readouterr().out
    cost = (TOKENS_IN * PRICE_IN + TOKENS_OUT * PRICE_OUT) / 1_000_000
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.strip().startswith("judge usage"))
    rows = [line.split() for line in lines[header + 1 : header + 3]]
    assert ["evaluator", "polite", "1", str(TOKENS_IN), str(TOKENS_OUT)] == rows[0][:5]
    assert ["judge", "llm:scripted", "1", str(TOKENS_IN), str(TOKENS_OUT)] == rows[1][:5]
    assert float(rows[0][-1]) == pytest.approx(cost)


def _metric_sums(reader: InMemoryMetricReader) -> dict[tuple[str, str], float]:
    data = reader.get_metrics_data()
    out: dict[tuple[str, str], float] = {}
    for rm in data.resource_metrics if data else []:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                for point in m.data.data_points:
                    key = (m.name, str(point.attributes.get(semconv.JUDGE_CALL_OUTCOME, "")))
                    out[key] = out.get(key, 0.0) + float(point.value)
    return out


def test_cost_and_refusals_are_counted_in_metrics(tmp_path: Path) -> None:
    reader = InMemoryMetricReader()
    per_call = (TOKENS_IN * PRICE_IN + TOKENS_OUT * PRICE_OUT) / 1_000_000
    with chat_server(responder=polite) as server:
        judge = OpenAIJudge(
            base_url=server.base_url,
            model="scripted",
            policy=CallPolicy(
                concurrency=1,
                cache_size=0,
                price=Price(input_per_million=PRICE_IN, output_per_million=PRICE_OUT),
                budget=Budget(tokens_per_hour=2 * (TOKENS_IN + TOKENS_OUT)),
            ),
            meter_provider=MeterProvider(metric_readers=[reader]),
        )
        criterion = {k: v for k, v in CRITERION.items() if k != "judge"}
        engine = Engine(
            parse_config({"evaluators": {"custom": [criterion]}}),
            judge_for=lambda name: judge if name == "polite" else None,
        )
        keep = CollectingSink()
        run_offline([str(TRACES)], engine, keep)
    sessions = len(keep.results)
    sums = _metric_sums(reader)
    assert sums[(semconv.M_JUDGE_CALLS, semconv.JUDGE_OUTCOME_OK)] == 2
    assert sums[(semconv.M_JUDGE_CALLS, semconv.JUDGE_OUTCOME_OVER_BUDGET)] == sessions - 2
    assert sums[(semconv.M_JUDGE_COST, "")] == pytest.approx(2 * per_call)


def test_the_budget_window_rolls_after_an_hour() -> None:
    now = [0.0]
    sent: list[int] = []
    scale = (ScalePoint(label="yes", score=1.0), ScalePoint(label="no", score=0.0))

    def transport(messages: Any, schema: Any) -> Reply:
        sent.append(1)
        text = json.dumps({"rating": "yes", "rationale": "r", "evidence": []})
        return Reply(text=text, input_tokens=90, output_tokens=10)

    core = CallCore(
        "llm:x",
        CallPolicy(cache_size=0, budget=Budget(tokens_per_hour=100)),
        transport,
        clock=lambda: now[0],
    )

    def ask(i: int) -> Any:
        criterion = Criterion(name="c", instructions=f"q{i}", scale=scale, evidence=("request",))
        return core.run(JudgeRequest(kind="custom", request="r", criterion=criterion))

    ask(1)
    with pytest.raises(JudgeError, match="window rolls in 3600s") as info:
        ask(2)
    assert info.value.error_type == "judge_budget"
    now[0] = WINDOW_S - 1
    with pytest.raises(JudgeError):
        ask(3)
    now[0] = WINDOW_S
    ask(4)
    assert len(sent) == 2


@pytest.mark.parametrize(
    ("settings", "problem"),
    [
        ({"budget": {"cost_per_hour": 1}}, "budget.cost_per_hour: needs the judge's price"),
        ({"budget": {"tokens": 5}}, "budget: expected {tokens_per_hour: N}"),
        ({"budget": {"tokens_per_hour": 0}}, "tokens_per_hour: expected a number above 0"),
        ({"price": {"input_per_million": 1}}, "price.output_per_million: required"),
        ({"price": 3}, "price: expected {input_per_million: X, output_per_million: Y}"),
    ],
)
def test_price_and_budget_problems_name_the_setting(settings: Any, problem: str) -> None:
    judges = {"llm": {"type": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m"}}
    judges["llm"].update(settings)
    with pytest.raises(ConfigError) as info:
        parse_config({"judges": judges})
    assert any(p.startswith("judges.llm.") and problem in p for p in info.value.problems), (
        info.value.problems
    )
