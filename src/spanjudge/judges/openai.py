"""A judge backed by any OpenAI-compatible chat-completions endpoint (vLLM, Ollama, llama.cpp,
OpenAI). Standard library only: the agent process gains no HTTP dependency."""

from __future__ import annotations

import http.client
import json
import os
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import metrics

from spanjudge.errors import JudgeError
from spanjudge.judges.base import JudgeKind, Judgement, JudgeRequest
from spanjudge.judges.prompts import response_schema
from spanjudge.judges.reliability import (
    CallCore,
    CallPolicy,
    Messages,
    Reply,
    RetryableJudgeError,
    as_int,
)

_RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
# The keys HTTP instrumentors check: the judge's own calls must never be traced back into the
# sessions it judges. Private in the API, but stable and used across opentelemetry-python-contrib.
_SUPPRESS_KEYS = (
    otel_context._SUPPRESS_INSTRUMENTATION_KEY,
    otel_context._SUPPRESS_HTTP_INSTRUMENTATION_KEY,
)


def _retry_after(headers: Any) -> float | None:
    value = headers.get("Retry-After") if headers is not None else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


class OpenAIJudge:
    """`Judge` over ``POST {base_url}/chat/completions``.

    With ``json_mode`` the request asks for structured output (``response_format`` with a JSON
    schema); a server that rejects that with HTTP 400 is asked again without it, once, and the
    reply goes through the same strict parser either way.
    """

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key_env: str | None = None,
        json_mode: bool = True,
        max_tokens: int = 512,
        temperature: float = 0.0,
        policy: CallPolicy | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        self.name = f"llm:{model}"
        self.model = model
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.api_key_env = api_key_env
        self.json_mode = json_mode
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.policy = policy or CallPolicy()
        self._core = CallCore(
            self.name,
            self.policy,
            self._send,
            meter_provider=meter_provider,
            sleep=sleep or time.sleep,
        )

    def judge(self, request: JudgeRequest) -> Judgement:
        return self._core.run(request)

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key_env:
            key = os.environ.get(self.api_key_env)
            if not key:
                raise JudgeError(
                    f"environment variable {self.api_key_env} (api_key_env) is not set",
                    error_type="judge_config",
                )
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def _send(self, messages: Messages, kind: JudgeKind) -> Reply:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }
        if self.json_mode:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": "judgement",
                    "strict": True,
                    "schema": response_schema(kind),
                },
            }
        try:
            return self._post(body)
        except _Unsupported:
            self.json_mode = False  # remembered: this server has no structured output
            body.pop("response_format")
            return self._post(body)

    def _post(self, body: dict[str, Any]) -> Reply:
        data = json.dumps(body).encode()
        req = urllib.request.Request(self.url, data=data, headers=self._headers(), method="POST")
        ctx = otel_context.get_current()
        for key in _SUPPRESS_KEYS:
            ctx = otel_context.set_value(key, True, ctx)
        token = otel_context.attach(ctx)
        try:
            with urllib.request.urlopen(req, timeout=self.policy.timeout_s) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:300].decode("utf-8", "replace") if exc.fp else ""
            exc.close()
            if exc.code == 400 and "response_format" in body and "response_format" in detail:
                raise _Unsupported() from None
            message = f"HTTP {exc.code} from {self.url}: {detail.strip()[:200]}"
            if exc.code in _RETRYABLE_STATUS:
                raise RetryableJudgeError(
                    message, error_type=f"http_{exc.code}", retry_after_s=_retry_after(exc.headers)
                ) from None
            raise JudgeError(message, error_type=f"http_{exc.code}") from None
        except TimeoutError as exc:
            raise RetryableJudgeError(
                f"no reply from {self.url} within {self.policy.timeout_s:g}s", error_type="timeout"
            ) from exc
        except urllib.error.URLError as exc:
            reason = exc.reason
            kind = (
                "timeout"
                if isinstance(reason, (TimeoutError, socket.timeout))
                else "connection_error"
            )
            raise RetryableJudgeError(
                f"cannot reach {self.url}: {reason}", error_type=kind
            ) from None
        except (ConnectionError, http.client.HTTPException) as exc:
            raise RetryableJudgeError(
                f"connection to {self.url} failed: {type(exc).__name__}: {exc}",
                error_type="connection_error",
            ) from None
        finally:
            otel_context.detach(token)
        return _reply(raw)


class _Unsupported(Exception):
    """The server rejected ``response_format``."""


def _reply(raw: bytes) -> Reply:
    try:
        doc = json.loads(raw)
        message = doc["choices"][0]["message"]
        text = message.get("content")
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        raise JudgeError(
            f"not a chat-completions response: {raw[:120]!r}", error_type="judge_bad_response"
        ) from None
    usage = doc.get("usage") if isinstance(doc.get("usage"), dict) else {}
    return Reply(
        text=text if isinstance(text, str) else None,
        input_tokens=as_int(usage.get("prompt_tokens")),
        output_tokens=as_int(usage.get("completion_tokens")),
    )
