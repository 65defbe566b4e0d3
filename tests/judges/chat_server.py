"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1 port 0 for judge tests."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Scripted:
    """One reply: HTTP status, body (dict -> JSON, str -> raw), headers, delay before replying."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


def completion(content: str, prompt_tokens: int = 100, completion_tokens: int = 20) -> Scripted:
    return Scripted(
        body={
            "id": "x",
            "object": "chat.completion",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens},
        }
    )


# A reply chosen from the request (its JSON payload), for a judge asked many questions at once.
Responder = Callable[[dict[str, Any]], Scripted]


def block(payload: dict[str, Any], name: str) -> str | None:
    """The content of the data block ``name`` in a judge request's user message."""
    user = next(m["content"] for m in payload["messages"] if m["role"] == "user")
    found = re.search(rf"<<<UNTRUSTED-\w+ {name}>>>\n(.*?)\n<<<END UNTRUSTED-\w+>>>", user, re.S)
    return found.group(1) if found else None


def user_text(payload: dict[str, Any]) -> str:
    return "\n".join(m["content"] for m in payload["messages"] if m["role"] == "user")


class ChatServer:
    def __init__(self, script: list[Scripted], responder: Responder | None = None) -> None:
        self.script = list(script)
        self.responder = responder
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                payload = json.loads(self.rfile.read(length))
                with server.lock:
                    server.requests.append(payload)
                    server.headers.append(dict(self.headers))
                    if server.responder is not None:
                        reply = server.responder(payload)
                    else:
                        reply = server.script.pop(0) if server.script else Scripted(status=599)
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                raw = reply.body if isinstance(reply.body, str) else json.dumps(reply.body or {})
                data = raw.encode()
                try:
                    self.send_response(reply.status)
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client timed out and left

            do_GET = do_POST

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"


@contextmanager
def chat_server(*script: Scripted, responder: Responder | None = None) -> Iterator[ChatServer]:
    server = ChatServer(list(script), responder)
    thread = threading.Thread(target=server.httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.httpd.shutdown()
        server.httpd.server_close()
        thread.join(5)
