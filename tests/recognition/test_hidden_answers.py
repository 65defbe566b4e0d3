"""A final answer the instrumentation hid is no answer (seen on LangGraph).

With OpenInference's `TraceConfig(hide_outputs=True)` every output is the literal
`__REDACTED__` (other tools write `<redacted>`, `[REDACTED]`); the report gave that placeholder as
the session's final answer and the outcome evaluator judged it. A hidden answer is no answer
text: `final_answer` is null and outcome says it could not judge. Spans come from a real SDK
tracer, as GenAI semconv and as OpenInference write them.
"""

from __future__ import annotations

import json

import pytest
from opentelemetry.trace import Tracer

from spanjudge.evaluators.base import EvaluationContext
from spanjudge.evaluators.outcome import Outcome
from spanjudge.trajectory.model import Trajectory
from spanjudge.values import Expectation
from tests.recognition.agent_spans import Say, agent_run, trajectory_of

HIDDEN = ["__REDACTED__", "<redacted>", "[REDACTED]", " __REDACTED__\n"]


def _outcome(trajectory: Trajectory) -> list[tuple[str, str | None]]:
    ctx = EvaluationContext(
        trajectory=trajectory, expectation=Expectation(success={"contains": "REDACTED"})
    )
    verdicts = Outcome().evaluate(ctx)
    assert all("hidden" in v.explanation for v in verdicts if v.outcome == "not_evaluated")
    return [(v.outcome, v.reason) for v in verdicts]


@pytest.mark.parametrize("hidden", HIDDEN)
def test_a_hidden_model_answer_is_no_final_answer(hidden: str) -> None:
    trajectory = trajectory_of(lambda t: agent_run(t, "What is the total?", [Say(text=hidden)]))
    assert trajectory.final_answer is None
    assert [turn.final_answer for turn in trajectory.turns] == [None]
    assert _outcome(trajectory) == [("not_evaluated", "no_final_answer")]


def test_an_earlier_model_text_does_not_stand_in_for_a_hidden_answer() -> None:
    actions = [Say(text="Let me think."), Say(text="__REDACTED__")]
    trajectory = trajectory_of(lambda t: agent_run(t, "What is the total?", actions))
    assert trajectory.final_answer is None


def _openinference_run(
    tracer: Tracer, answer: str, request: str = "What is the total?", *, raw: bool = False
) -> None:
    """An OpenInference LangGraph turn; with hide_outputs / hide_inputs the instrumentation
    writes the placeholder for the answer / the request."""
    agent = {
        "openinference.span.kind": "AGENT",
        "input.value": request if raw else json.dumps({"messages": [["user", request]]}),
        "output.value": answer,
        "session.id": "s1",
    }
    llm = {
        "openinference.span.kind": "LLM",
        "llm.model_name": "m",
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": request,
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": answer,
        "output.value": answer,
        "llm.token_count.prompt": 10,
        "llm.token_count.completion": 5,
    }
    with (
        tracer.start_as_current_span("LangGraph", attributes=agent),
        tracer.start_as_current_span("ChatModel", attributes=llm),
    ):
        pass


@pytest.mark.parametrize("hidden", HIDDEN)
def test_an_openinference_hidden_output_is_no_final_answer(hidden: str) -> None:
    trajectory = trajectory_of(lambda t: _openinference_run(t, hidden))
    assert [turn.request for turn in trajectory.turns] == ["What is the total?"]
    assert trajectory.final_answer is None
    assert _outcome(trajectory) == [("not_evaluated", "no_final_answer")]


def test_a_visible_answer_that_mentions_redaction_stays_the_answer() -> None:
    text = "The names were [REDACTED] in the source; the total is 3."
    trajectory = trajectory_of(lambda t: _openinference_run(t, text))
    assert trajectory.final_answer == text
    assert _outcome(trajectory) == [("pass", None)]


@pytest.mark.parametrize("raw", [True, False])
@pytest.mark.parametrize("hidden", HIDDEN)
def test_a_hidden_request_is_no_request(hidden: str, raw: bool) -> None:
    # TraceConfig(hide_inputs=True): a judge must not read the placeholder as what the user asked
    def run(tracer: Tracer) -> None:
        _openinference_run(tracer, "The total is 3.", hidden, raw=raw)

    trajectory = trajectory_of(run)
    assert [turn.request for turn in trajectory.turns] == [None]
    assert trajectory.request is None
    assert trajectory.final_answer == "The total is 3."
