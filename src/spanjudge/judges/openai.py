"""A judge backed by any OpenAI-compatible chat-completions endpoint (vLLM, Ollama, llama.cpp,
OpenAI). Standard library only: the agent process gains no HTTP dependency."""

from __future__ import annotations

import http.client
import json
import logging
import os
import re
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from opentelemetry import context as otel_context
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
from spanjudge.spans import jsonfast

_RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
# Structured output, most to least precise; a server that refuses one is asked with the next.
RESPONSE_FORMATS = ("json_schema", "json_object", "plain")
# llama.cpp's server answers an unsupported json_schema with HTTP 500, others with 400 or 422.
_FORMAT_REFUSAL_STATUS = frozenset({400, 415, 422, 500, 501})
_FORMAT_REFUSAL = re.compile(
    r"response_format|json_schema|json_object|schema|grammar|structured output", re.IGNORECASE
)
log = logging.getLogger("spanjudge")
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

    With ``json_mode`` the request asks for structured output: a JSON schema first, then plain
    JSON mode, then none, moving down whenever the server answers that it does not support the
    format (HTTP 400, 422 or 500 naming it; llama.cpp's server answers 500). The move is
    remembered for this judge and logged once. Every reply goes through the same strict parser.
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
        # What to ask for next; moves down RESPONSE_FORMATS when the server refuses one.
        self.response_format = "json_schema" if json_mode else "plain"
        self._lock = threading.Lock()
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

    def _send(self, messages: Messages, schema: dict[str, Any]) -> Reply:
        while True:
            mode = self.response_format
            body: dict[str, Any] = {
                "model": self.model,
                "messages": messages,
                "temperature": self.temperature,
                "max_tokens": self.max_tokens,
            }
            if mode == "json_schema":
                body["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {
                        "name": "judgement",
                        "strict": True,
                        "schema": schema,
                    },
                }
            elif mode == "json_object":
                # The schema beside JSON mode: llama.cpp's server turns it into a grammar, so
                # the reply has the judgement's keys and allowed ratings; others ignore it.
                body["response_format"] = {"type": "json_object", "schema": schema}
            try:
                return self._post(body)
            except _Unsupported as exc:
                self._downgrade(mode, exc.detail)

    def _downgrade(self, mode: str, detail: str) -> None:
        """Remember that this server refuses ``mode``; say so once per judge."""
        fallback = RESPONSE_FORMATS[RESPONSE_FORMATS.index(mode) + 1]
        with self._lock:
            if self.response_format != mode:
                return  # another thread already moved on
            self.response_format = fallback
        log.warning(
            "judge %s: %s refused response_format %s (%s); asking with %s from now on",
            self.name,
            self.url,
            mode,
            detail[:160] or "no detail",
            fallback if fallback != "plain" else "no response_format",
        )

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
            if (
                "response_format" in body
                and exc.code in _FORMAT_REFUSAL_STATUS
                and _FORMAT_REFUSAL.search(detail)
            ):
                raise _Unsupported(f"HTTP {exc.code}: {detail.strip()}") from None
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

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def _reply(raw: bytes) -> Reply:
    try:
        doc = jsonfast.parse(raw)
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
