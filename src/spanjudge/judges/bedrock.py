"""A judge backed by Amazon Bedrock Converse. ``boto3`` is the optional ``bedrock`` extra: it is
imported on first use, and a missing install is a clear `JudgeError`, not an import crash."""

from __future__ import annotations

import importlib
import importlib.util
import threading
import time
from collections.abc import Callable
from typing import Any

from opentelemetry import metrics

from spanjudge.errors import JudgeError
from spanjudge.judges.base import Judgement, JudgeRequest
from spanjudge.judges.reliability import (
    CallCore,
    CallPolicy,
    Messages,
    Reply,
    RetryableJudgeError,
    as_int,
)

INSTALL_HINT = "the bedrock judge needs boto3: pip install 'spanjudge[bedrock]'"
_RETRYABLE_CODES = frozenset(
    {
        "ThrottlingException",
        "TooManyRequestsException",
        "ServiceUnavailableException",
        "InternalServerException",
        "ModelNotReadyException",
        "ModelTimeoutException",
        "RequestTimeout",
    }
)


def boto3_available() -> bool:
    """True when boto3 can be imported (checked at configuration time)."""
    return importlib.util.find_spec("boto3") is not None


class BedrockJudge:
    """`Judge` over ``bedrock-runtime`` ``converse``. ``client`` may be injected (tests, custom
    sessions); otherwise one is created lazily from ``region`` and ``profile``."""

    def __init__(
        self,
        *,
        model: str,
        region: str | None = None,
        profile: str | None = None,
        max_tokens: int = 512,
        temperature: float = 0.0,
        policy: CallPolicy | None = None,
        client: Any = None,
        meter_provider: metrics.MeterProvider | None = None,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        self.name = f"llm:{model}"
        self.model = model
        self.region = region
        self.profile = profile
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.policy = policy or CallPolicy()
        self._client = client
        self._client_lock = threading.Lock()
        self._core = CallCore(
            self.name,
            self.policy,
            self._send,
            meter_provider=meter_provider,
            sleep=sleep or time.sleep,
        )

    def judge(self, request: JudgeRequest) -> Judgement:
        return self._core.run(request)

    def client(self) -> Any:
        with self._client_lock:
            if self._client is None:
                try:
                    boto3 = importlib.import_module("boto3")
                    botocore_config = importlib.import_module("botocore.config")
                except ImportError:
                    raise JudgeError(INSTALL_HINT, error_type="missing_dependency") from None
                session = boto3.Session(profile_name=self.profile, region_name=self.region)
                # Retries are ours (one policy for every judge), so botocore makes one attempt.
                config = botocore_config.Config(
                    connect_timeout=self.policy.timeout_s,
                    read_timeout=self.policy.timeout_s,
                    retries={"max_attempts": 1, "mode": "standard"},
                )
                self._client = session.client("bedrock-runtime", config=config)
            return self._client

    def _send(self, messages: Messages, schema: dict[str, Any]) -> Reply:
        system = [{"text": m["content"]} for m in messages if m["role"] == "system"]
        convo = [
            {"role": m["role"], "content": [{"text": m["content"]}]}
            for m in messages
            if m["role"] != "system"
        ]
        client = self.client()
        try:
            response = client.converse(
                modelId=self.model,
                system=system,
                messages=convo,
                inferenceConfig={"maxTokens": self.max_tokens, "temperature": self.temperature},
            )
        except Exception as exc:  # botocore's exception classes are only known at runtime
            raise _translate(exc) from None
        try:
            parts = response["output"]["message"]["content"]
            text = "".join(p.get("text", "") for p in parts if isinstance(p, dict))
        except (KeyError, TypeError):
            raise JudgeError(
                "not a Converse response (no output.message.content)",
                error_type="judge_bad_response",
            ) from None
        usage = response.get("usage") or {}
        return Reply(
            text=text,
            input_tokens=as_int(usage.get("inputTokens")),
            output_tokens=as_int(usage.get("outputTokens")),
        )


def _translate(exc: Exception) -> JudgeError:
    name = type(exc).__name__
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        code = str(response.get("Error", {}).get("Code", name))
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        message = f"Bedrock {code}: {response.get('Error', {}).get('Message', exc)}"
        if code in _RETRYABLE_CODES or (
            isinstance(status, int) and (status == 429 or status >= 500)
        ):
            return RetryableJudgeError(message, error_type=code)
        return JudgeError(message, error_type=code)
    if name in ("ReadTimeoutError", "ConnectTimeoutError"):
        return RetryableJudgeError(f"Bedrock timed out: {exc}", error_type="timeout")
    if name in ("EndpointConnectionError", "ConnectionClosedError"):
        return RetryableJudgeError(f"cannot reach Bedrock: {exc}", error_type="connection_error")
    return JudgeError(f"Bedrock call failed: {name}: {exc}", error_type=name)
