"""Which model output may be a session's final answer: the evidence rules every preset shares
(ARCHITECTURE.md section 2), beside the tool-call rules in `evidence`.

The final answer is the last assistant text of the agent's final output, whatever its shape:
GenAI parts, a framework's own message JSON (`role` with `parts`, `items` or `content`), or
plain text (`assistant_text`); never the run's texts run together (`not_concatenated`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from spanjudge.recognition.base import parse_json
from spanjudge.trajectory.assemble import is_stop_reason
from spanjudge.trajectory.hidden import hidden
from spanjudge.trajectory.model import Trajectory
from spanjudge.trajectory.steps import Step

ASSISTANT_ROLES = frozenset({"assistant", "model", "ai", "agent", "bot"})
# Where a message keeps its content, by framework: GenAI `parts`, Semantic Kernel-style
# `items`, OpenAI/Anthropic-style `content`.
_CONTENT_KEYS = ("parts", "items", "content")
_MESSAGE_KEYS = (*_CONTENT_KEYS, "text")  # `{"text": ..., "files": []}` is a result message too
# An object's repr: `StopEvent(result=AgentOutput(response=...` (Python's dataclass and
# pydantic reprs open with the class name and the first field, and end with its closing
# parenthesis, or with "..." where the framework cut them short).
_OBJECT_REPR = re.compile(r"\A[A-Za-z_][\w.]*\([A-Za-z_]\w*=")
_REPR_ENDS = (")", "...", "\u2026")


def assistant_text(value: Any) -> str | None:
    """The last assistant text in an agent's output: plain text as it is; a message, or a list
    of messages, in any framework's JSON (the last assistant message with text), also held
    under a response's `message`; a list of content parts. JSON that holds no message (a
    graph's state) is no text."""
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in ("[", "{", '"'):
            decoded = parse_json(stripped)
            if decoded is not stripped:
                return assistant_text(decoded) if not isinstance(decoded, str) else decoded.strip()
        return stripped or None
    if isinstance(value, Mapping):
        if is_message(value):
            return message_text(value) if _speaks(value) else None
        chosen = response_message(value)
        return assistant_text(chosen) if chosen is not None else None
    if isinstance(value, (list, tuple)):
        said = [m for m in value if isinstance(m, Mapping) and "role" in m]
        if said:
            for message in reversed(said):
                if _speaks(message) and (text := message_text(message)):
                    return text
            return None
        return _parts_text(value)
    return None


def is_message(value: Mapping[str, Any]) -> bool:
    """``value`` is a message of its own: it has a `role`, or content under any framework's key
    (`parts`, `items`, `content`, `text`)."""
    return "role" in value or any(key in value for key in _MESSAGE_KEYS)


def response_message(value: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The message a model API's whole response object holds: under `message` (`{"message":
    {"role": ...}, "usage": ...}`), or as its first choice, OpenAI-style (`{"choices":
    [{"message": {...}}]}`) or Gemini-style (`{"candidates": [{"content": {...}}]}`), as tracers
    that record the client's return value write it; None for any other object."""
    held = value.get("message")  # a response holding its message: `{"message", "usage"}`
    if isinstance(held, Mapping) and "role" in held:
        return held
    for listed, inner in (("choices", "message"), ("candidates", "content")):
        choices = value.get(listed)
        if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
            message = choices[0].get(inner)
            if isinstance(message, Mapping):
                return message
    return None


def object_repr(text: str | None) -> bool:
    """``text`` is an object's repr (often cut short with a trailing "..."): how a framework
    printed its result object, not what the agent said. A model call's last assistant text,
    where recorded, is the answer instead. A sentence that only opens like one
    (`connect(host=...) is the call to make`) is no repr."""
    if text is None:
        return False
    stripped = text.strip()
    return _OBJECT_REPR.match(stripped) is not None and stripped.endswith(_REPR_ENDS)


def _speaks(message: Mapping[str, Any]) -> bool:
    role = message.get("role")
    return role is None or str(role).lower() in ASSISTANT_ROLES


def message_text(message: Mapping[str, Any]) -> str | None:
    """The text of one message in any framework's shape (`parts`, `items`, `content`, `text`),
    whatever its role."""
    for key in _CONTENT_KEYS:
        content = message.get(key)
        if isinstance(content, str) and content.strip():
            return content.strip()
        if isinstance(content, (list, tuple)) and (text := _parts_text(content)):
            return text
    text = message.get("text")
    return text.strip() if isinstance(text, str) and text.strip() else None


def _parts_text(parts: Sequence[Any]) -> str | None:
    """The text parts of one message, joined: tool calls and other parts are left out."""
    texts = []
    for part in parts:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, Mapping) and part.get("type") in (None, "text", "output_text"):
            text = part.get("text", part.get("content"))
            if isinstance(text, str):
                texts.append(text)
    joined = "\n".join(t.strip() for t in texts if t.strip())
    return joined or None


def not_concatenated(steps: Sequence[Step]) -> list[Step]:
    """Answers that run the request's texts together ("I'll use the currency-report skill."
    then the answer, as one output or one message of several text parts): the agent's output
    ends with what the model last said, and that is the answer; where that was not recorded,
    the texts the model said on the way (beside its tool calls) are taken off the front. An
    answer split into parts that the model said as one text is left as it is."""
    last: dict[str, Step] = {}
    on_the_way: dict[str, list[str]] = {}
    for step in steps:
        if step.kind != "model_call" or not step.text or not step.text.strip():
            continue
        if step.tool_requests:
            on_the_way.setdefault(step.trace_id, []).append(step.text.strip())
            continue
        known = last.get(step.trace_id)
        if known is None or step.end_unix_nano >= known.end_unix_nano:
            last[step.trace_id] = step
    if not last and not on_the_way:
        return list(steps)
    out = []
    for step in steps:
        if step.kind == "final_answer" and step.text:
            text = _as_said(step, last.get(step.trace_id), on_the_way.get(step.trace_id, []))
            if text != step.text:
                step = replace(step, text=text)
        out.append(step)
    return out


def _as_said(answer: Step, said: Step | None, preambles: Sequence[str]) -> str:
    text = answer.text or ""
    if said is not None and said.end_unix_nano <= answer.end_unix_nano:
        tail = (said.text or "").strip()
        return tail if _ends_with(text, tail) else text
    return _without_preambles(text, preambles)


def _without_preambles(text: str, preambles: Sequence[str]) -> str:
    """``text`` without the leading texts in ``preambles`` (each once, in any order), when
    something is left after them."""
    rest = text.strip()
    for _ in range(len(preambles)):
        lead = next((p for p in preambles if rest.startswith(p) and rest[len(p) :].strip()), None)
        if lead is None:
            break
        rest = rest[len(lead) :].strip()
    return rest if rest != text.strip() else text


def _ends_with(text: str, tail: str) -> bool:
    """``text`` is longer than ``tail`` and ends with it, whitespace aside."""
    whole, end = " ".join(text.split()), " ".join(tail.split())
    return len(whole) > len(end) > 0 and whole.endswith(end)


def may_answer(step: Step, *, unrecorded_stops: bool = True) -> bool:
    """A model output can be the final answer: text, a stop finish reason (`is_stop_reason`,
    the one rule; ``unrecorded_stops``: whether an output that recorded none counts as
    stopped), and no tool asked for (instrumentations write `stop` on tool-calling outputs
    too, so the reason alone is no evidence)."""
    stopped = is_stop_reason(step.finish_reason) if step.finish_reason else unrecorded_stops
    return (
        step.kind == "model_call"
        and bool(step.text and step.text.strip())
        and not step.tool_requests
        and stopped
    )


def aborted_after(step: Step, turns: Iterable[Step]) -> bool:
    """The run failed after ``step``: an agent span of its trace ended later with error status
    (an aborted run has no final answer, whatever the model said on the way)."""
    return any(
        t.status == "error"
        and t.trace_id == step.trace_id
        and t.end_unix_nano >= step.end_unix_nano
        for t in turns
    )


def without_hidden_text(trajectory: Trajectory) -> Trajectory:
    """A hidden answer or request is no text: the turn and the session report none (outcome
    then says it cannot judge, judges that need the request say none was recorded), and no
    earlier model text stands in for a hidden answer."""
    turns = trajectory.turns
    if not any(hidden(t.final_answer) or hidden(t.request) for t in turns) and not hidden(
        trajectory.final_answer
    ):
        return trajectory
    return replace(
        trajectory,
        turns=tuple(
            replace(
                t,
                final_answer=None if hidden(t.final_answer) else t.final_answer,
                request=None if hidden(t.request) else t.request,
            )
            for t in turns
        ),
        final_answer=None if hidden(trajectory.final_answer) else trajectory.final_answer,
    )
