"""The `bedrock` judge with a stubbed bedrock-runtime client (botocore's Stubber, no network)."""

from __future__ import annotations

import json
import sys
from typing import Any

# boto3 is a test dependency (the `bedrock` extra at run time): imported plainly, never skipped.
import boto3
import pytest
from botocore import stub

from spanjudge.errors import JudgeError
from spanjudge.judges.base import JudgeRequest
from spanjudge.judges.bedrock import BedrockJudge
from spanjudge.judges.reliability import CallPolicy

REQUEST = JudgeRequest(kind="outcome", request="sum?", final_answer="42", reference_answer="42")


def client() -> tuple[Any, Any]:
    c = boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",
    )
    return c, stub.Stubber(c)


def converse_reply(text: str) -> dict[str, Any]:
    return {
        "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
        "stopReason": "end_turn",
        "usage": {"inputTokens": 50, "outputTokens": 7, "totalTokens": 57},
        "metrics": {"latencyMs": 1},
    }


def test_converse_answer_is_parsed() -> None:
    c, stubber = client()
    stubber.add_response(
        "converse", converse_reply(json.dumps({"rating": "yes", "rationale": "42 matches"}))
    )
    with stubber:
        judgement = BedrockJudge(model="anthropic.test", client=c).judge(REQUEST)
    assert (judgement.rating, judgement.judge) == ("yes", "llm:anthropic.test")


def test_throttling_is_retried_and_validation_errors_are_not() -> None:
    c, stubber = client()
    stubber.add_client_error("converse", "ThrottlingException", http_status_code=429)
    stubber.add_response("converse", converse_reply('{"rating": "no", "rationale": "wrong"}'))
    stubber.add_client_error("converse", "ValidationException", http_status_code=400)
    sleeps: list[float] = []
    judge = BedrockJudge(
        model="m", client=c, policy=CallPolicy(backoff_s=0.01), sleep=sleeps.append
    )
    with stubber:
        assert judge.judge(REQUEST).rating == "no"
        with pytest.raises(JudgeError) as info:
            judge.judge(
                JudgeRequest(
                    kind="outcome", request="other", final_answer="1", reference_answer="1"
                )
            )
    assert sleeps == [0.01]
    assert info.value.error_type == "ValidationException"


def test_missing_boto3_is_a_clear_judge_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # A None entry in sys.modules makes `import boto3` raise ImportError, as if not installed.
    monkeypatch.setitem(sys.modules, "boto3", None)
    with pytest.raises(JudgeError) as info:
        BedrockJudge(model="m").judge(REQUEST)
    assert info.value.error_type == "missing_dependency"
    assert "pip install 'spanjudge[bedrock]'" in str(info.value)
