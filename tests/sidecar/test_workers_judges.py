"""Judges in `spanjudge serve` with two evaluation processes: a judge's hourly budget bounds what
the server spends, not what each process spends (the processes share it), and what the
configuration cannot judge is said once, not once per process."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.judges.chat_server import chat_server, completion
from tests.sidecar.helpers import SidecarProcess
from tests.sidecar.workers_helpers import _as_exported, _config, _env, _Receiver, _send

pytestmark = pytest.mark.slow
# Every reply reports this usage.
TOKENS_IN, TOKENS_OUT = 200, 30
CRITERION = {
    "name": "polite",
    "instructions": "Is the final answer polite?",
    "scale": [{"label": "polite", "score": 1}, {"label": "rude", "score": 0}],
    "judge": "llm",
}


def polite(payload: dict[str, Any]) -> Any:
    body = {"rating": "polite", "rationale": "it says please", "evidence": []}
    return completion(json.dumps(body), prompt_tokens=TOKENS_IN, completion_tokens=TOKENS_OUT)


def test_two_workers_share_the_judges_budget(tmp_path: Path) -> None:
    per_call = TOKENS_IN + TOKENS_OUT
    budget = 4 * per_call  # four calls for the server, two for each process
    verdicts = _Receiver()
    with chat_server(responder=polite) as server:
        judge = {
            "type": "openai",
            "base_url": server.base_url,
            "model": "scripted",
            "concurrency": 1,  # no second call starts before the first is counted
            "cache_size": 0,
            "budget": {"tokens_per_hour": budget},
        }
        config = {
            **_config(tmp_path, 2, on_shutdown="evaluate"),
            "judges": {"llm": judge},
            "evaluators": {"custom": [CRITERION]},
        }
        sidecar = SidecarProcess(tmp_path, config, _env(verdicts))
        sidecar.start()
        try:
            assert len(sidecar.endpoints["workers"]) == 2
            _send(sidecar.endpoints["grpc"], _as_exported())
            assert sidecar.terminate() == 0  # on_shutdown evaluate: every session is judged now
        finally:
            if sidecar.proc is not None and sidecar.proc.poll() is None:
                sidecar.kill9()
        asked = len(server.requests)
    time.sleep(0.5)
    verdicts.stop()
    served = [
        v for v in verdicts.received.verdicts().values() if v["gen_ai.evaluation.name"] == "polite"
    ]
    passed = [v for v in served if v["spanjudge.outcome"] == "pass"]
    refused = [v for v in served if v.get("spanjudge.reason") == "judge_budget"]
    assert len(refused) > len(passed)  # many more sessions than the budget pays for
    assert asked == len(passed) == budget // per_call


def test_an_evaluator_without_a_judge_is_reported_once_by_serve(tmp_path: Path) -> None:
    unjudged = {k: v for k, v in CRITERION.items() if k != "judge"}
    verdicts = _Receiver()
    config = {**_config(tmp_path, 2), "evaluators": {"custom": [unjudged]}}
    sidecar = SidecarProcess(tmp_path, config, _env(verdicts))
    sidecar.start()
    try:
        assert len(sidecar.endpoints["workers"]) == 2
        assert sidecar.terminate() == 0
    finally:
        if sidecar.proc is not None and sidecar.proc.poll() is None:
            sidecar.kill9()
        verdicts.stop()
    log = sidecar.log.read_text()
    assert log.count("have no LLM judge") == 1, log
