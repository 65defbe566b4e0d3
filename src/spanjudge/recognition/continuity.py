"""Is the session whole? Detect earlier turns that this process never received.

Behind the Collector's load-balancing exporter each replica owns the sessions that hash to it.
When the replica set changes while a session is open, its later turns land on a replica that
never saw the earlier ones. That replica must not judge the turns it holds as if they were the
whole session ("the required skill was never loaded" may be false: it was loaded in turn 1).

The evidence is what agents send anyway: a model call's input replays the conversation so far.
If the earliest model call this session holds already carries a finished exchange (a user
request, then an assistant answer in text, then the current request), earlier turns happened
and their spans are not here. Model inputs are read in every convention spanjudge reads: the
GenAI `gen_ai.input.messages` attribute and details event, the v1.36 per-message events,
OpenInference's `llm.input_messages.N.*` and ADK 1.x's `gcp.vertex.agent.llm_request` contents;
where the first model call's own input is unreadable, the span it was merged from (ADK 1.x's
`call_llm`) and then the first agent run's input (Haystack's `haystack.agent.input`, JSON where
the model call's input is a Python repr). Sessions recorded without message content give no
such evidence and are taken as whole. A session whose first agent run only continues a request
(its input is tool results or approvals: Agent Framework's approval round-trip) lacks the run
that took that request.

A session found incomplete gets ``complete=False`` (so every evaluator applies its own
"cut short" rules), and the verdicts that rest on what the missing turns did become
``not_evaluated`` with reason ``prior_turns_missing``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from spanjudge import reasons
from spanjudge import semconv as sc
from spanjudge.recognition import genai, openinference
from spanjudge.recognition.base import parse_json
from spanjudge.spans.record import SpanRecord
from spanjudge.trajectory.model import Trajectory
from spanjudge.values import Verdict, not_evaluated

if TYPE_CHECKING:
    from spanjudge.values import Outcome

_USER = frozenset({"user", "human"})
_ASSISTANT = frozenset({"assistant", "model", "ai"})
_EVENT_ROLES = {
    sc.EV_GEN_AI_USER_MESSAGE: "user",
    sc.EV_GEN_AI_ASSISTANT_MESSAGE: "assistant",
    sc.EV_GEN_AI_TOOL_MESSAGE: "tool",
    sc.EV_GEN_AI_SYSTEM_MESSAGE: "system",
}

# Which outcomes of the built-in evaluators rest on the whole session. An absence claim ("the
# skill was never loaded", "no budget was exceeded") is unproven when turns are missing; a
# presence claim (a load that failed, a step out of scope, seen in the turns held) stands.
HISTORY_DEPENDENT: Mapping[str, frozenset[Outcome]] = {
    reasons.SKILL_LOADED: frozenset({"fail"}),
    reasons.SKILL_OMISSION: frozenset({"pass", "fail"}),
    reasons.TRAJECTORY_VALIDITY: frozenset({"fail"}),
    reasons.OUTCOME: frozenset({"pass", "fail"}),  # judged against a request from a missing turn
    reasons.COST: frozenset({"pass"}),
    reasons.ROBUSTNESS: frozenset({"pass"}),
    reasons.SIDE_EFFECTS: frozenset({"pass"}),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class _Message:
    role: str
    has_text: bool


def _genai_messages(span: SpanRecord) -> list[_Message]:
    found = genai.messages(span, sc.GEN_AI_INPUT_MESSAGES)
    if found:
        return [
            _Message(
                role=str(m.get("role") or "").lower(),
                has_text=bool(genai.content_text(genai.parts(m, "text"))),
            )
            for m in found
        ]
    events = [e for e in span.events if e.name in _EVENT_ROLES]
    return [
        _Message(
            role=_EVENT_ROLES[e.name],
            has_text=bool(genai.content_text(e.attributes.get("content"))),
        )
        for e in events
    ]


def _has_text(parts: Any, key: str) -> bool:
    """Whether a list of content parts holds a non-empty text (a model's thoughts are no answer)."""
    return isinstance(parts, list) and any(
        isinstance(p, dict) and isinstance(p.get(key), str) and p[key].strip()
        and not p.get("thought")
        for p in parts
    )  # fmt: skip


def _json_messages(span: SpanRecord, key: str, field: str, parts: str) -> list[_Message]:
    """Messages ``{"role", <parts>: [{"text": ...}, ...]}`` under ``field`` of a JSON attribute:
    ADK 1.x's `contents` / `parts`, Haystack's `messages` / `content`."""
    value = span.attributes.get(key)
    if value is None:  # (most spans: not this convention's)
        return []
    decoded = parse_json(value)
    found = decoded.get(field) if isinstance(decoded, dict) else None
    return [
        _Message(role=str(m.get("role") or "").lower(), has_text=_has_text(m.get(parts), "text"))
        for m in (found if isinstance(found, list) else ())
        if isinstance(m, dict)
    ]


def input_messages(span: SpanRecord) -> list[_Message]:
    """The model input of ``span`` as (role, carries text) in order, in any convention."""
    found = _genai_messages(span)
    if found:
        return found
    found = [
        _Message(role=m.role, has_text=bool(m.text)) for m in openinference.messages(span, "input")
    ]
    return (
        found
        or _json_messages(span, sc.GCP_VERTEX_AGENT_LLM_REQUEST, "contents", "parts")
        or _json_messages(span, sc.HAYSTACK_AGENT_INPUT, "messages", "content")
    )


def replayed_requests(messages: Sequence[_Message]) -> int:
    """How many earlier user requests the input replays with the assistant's answer to them.

    Counts user text messages that an assistant text message follows before the last user text
    message (the current request). Tool results and tool-call-only assistant messages are part
    of one turn and never count.
    """
    last_user = max(
        (i for i, m in enumerate(messages) if m.role in _USER and m.has_text), default=-1
    )
    count = 0
    asked = False
    for message in messages[:last_user]:
        if message.role in _USER and message.has_text:
            asked = True
        elif asked and message.role in _ASSISTANT and message.has_text:
            count += 1
            asked = False
    return count


def missing_prior_turns(trajectory: Trajectory, spans: Iterable[SpanRecord]) -> str | None:
    """Evidence that earlier turns of this session were never received, or None when whole."""
    opening = next((s for s in trajectory.steps if s.kind == "agent_turn"), None)
    if opening is not None and opening.continuation:
        # its input is only tool results or approvals: the run that took the request is elsewhere
        return (
            f"the first agent run held (span {opening.span_id}) continues 1 earlier user "
            f"request (its input holds only tool results or approvals); the spans that took "
            f"that request never arrived here"
        )
    first = next((s for s in trajectory.steps if s.kind == "model_call"), None)
    # Where the earliest model input is readable: the first model call, the span it was merged
    # from, the first agent run's own input.
    candidates = []
    if first is not None:
        candidates += [("model call", first.span_id), ("model call", first.parent_span_id)]
    if opening is not None:
        candidates.append(("agent run", opening.span_id))
    wanted = {span_id for _, span_id in candidates if span_id}
    by_id = {s.span_id: s for s in spans if s.span_id in wanted} if wanted else {}
    for what, span_id in candidates:
        span = by_id.get(span_id) if span_id else None
        messages = input_messages(span) if span is not None else []
        if not messages:
            continue
        replayed = replayed_requests(messages)
        if not replayed:
            return None
        return (
            f"the first {what} held (span {span_id}) replays {replayed} earlier user "
            f"request(s) with their answers; the spans of those turns never arrived here"
        )
    return None


def check(trajectory: Trajectory, spans: Sequence[SpanRecord]) -> Trajectory:
    """``trajectory``, marked incomplete when its earlier turns are missing."""
    evidence = missing_prior_turns(trajectory, spans)
    if evidence is None:
        return trajectory
    return replace(trajectory, complete=False, prior_turns_missing=evidence)


def mark(trajectory: Trajectory, verdicts: Sequence[Verdict]) -> list[Verdict]:
    """Verdicts that rest on missing turns become ``not_evaluated`` (``prior_turns_missing``)."""
    evidence = trajectory.prior_turns_missing
    if evidence is None:
        return list(verdicts)
    out = []
    for verdict in verdicts:
        depends = verdict.outcome in HISTORY_DEPENDENT.get(verdict.evaluator, frozenset())
        if depends or verdict.reason == reasons.SESSION_INCOMPLETE:
            out.append(_unjudged(verdict, evidence))
        else:
            out.append(verdict)
    return out


def _unjudged(verdict: Verdict, evidence: str) -> Verdict:
    held: dict[str, Any] = {"outcome_on_turns_held": verdict.outcome}
    if verdict.score is not None:
        held["score_on_turns_held"] = verdict.score
    return not_evaluated(
        verdict.evaluator,
        reasons.PRIOR_TURNS_MISSING,
        f"not judged: {evidence}. On the turns held it read: {verdict.explanation}",
        target=verdict.target,
        judge=verdict.judge,
        evidence=verdict.evidence,
        details={**(verdict.details or {}), **held},
    )
