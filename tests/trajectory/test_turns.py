"""A turn is one user request: agents handing over or called as tools inside
one request, and a run resumed with only an approval as input, are not extra turns."""

from __future__ import annotations

import json
from typing import Any

from opentelemetry.trace import Tracer

from tests.recognition.agent_spans import Call, Say, agent_run, chat_span, tool_span, trajectory_of

AGENT = {"gen_ai.operation.name": "invoke_agent"}


def _agent(tracer: Tracer, name: str, inputs: list[dict[str, Any]], answer: str) -> None:
    attrs = {
        **AGENT,
        "gen_ai.agent.name": name,
        "gen_ai.input.messages": json.dumps(inputs),
        "gen_ai.output.messages": json.dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": answer}]}]
        ),
    }
    with tracer.start_as_current_span(f"invoke_agent {name}", attributes=attrs):
        pass


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"type": "text", "content": text}]}


def test_sibling_agents_in_one_request_are_one_turn_answered_by_the_last_to_finish() -> None:
    def body(tracer: Tracer) -> None:
        with tracer.start_as_current_span("workflow"):
            orchestrator = {**AGENT, "gen_ai.agent.name": "orchestrator"}
            with tracer.start_as_current_span("invoke_agent orchestrator", attributes=orchestrator):
                pass
            _agent(tracer, "translator", [_user("Translate 'hello' to Spanish.")], "hola")
            _agent(tracer, "orchestrator", [_user("Say hello in Spanish.")], "In Spanish: hola.")

    trajectory = trajectory_of(body)
    assert trajectory.stats.turns == 1
    assert trajectory.final_answer == "In Spanish: hola."


def test_a_run_resumed_with_only_an_approval_continues_the_request() -> None:
    approval = {
        "role": "user",
        "parts": [{"type": "function_approval_response", "id": "a1", "approved": True}],
    }

    def body(tracer: Tracer) -> None:
        agent_run(
            tracer,
            "Delete out/old.txt.",
            [Say(asks=[("c1", "delete_file", {"path": "out/old.txt"})])],
        )
        attrs = {
            **AGENT,
            "gen_ai.input.messages": json.dumps([_user("Delete out/old.txt."), approval]),
        }
        with tracer.start_as_current_span("invoke_agent a", attributes=attrs):
            tool_span(tracer, Call("delete_file", {"path": "out/old.txt"}, "deleted", call_id="c1"))
            chat_span(tracer, Say(text="Deleted."), "Delete out/old.txt.")

    trajectory = trajectory_of(body)
    assert trajectory.stats.turns == 1
    assert trajectory.stats.tool_calls == 1 and trajectory.stats.errors == 0
    assert trajectory.final_answer == "Deleted."
    assert trajectory.turns[0].request == "Delete out/old.txt."


def test_a_call_interrupted_for_approval_and_run_on_resuming_is_one_call_in_one_turn() -> None:
    delete = {"path": "out/tmp.txt"}

    def body(tracer: Tracer) -> None:
        # first trace: the model asks, the call stops for approval (its span has no result)
        agent_run(
            tracer,
            "Delete out/tmp.txt.",
            [Say(asks=[("c1", "delete_file", delete)]), Call("delete_file", delete)],
        )
        # second trace: the resumed run executes the approved call, then answers
        agent_run(
            tracer,
            "Delete out/tmp.txt.",
            [Call("delete_file", delete, "deleted out/tmp.txt"), Say(text="Deleted out/tmp.txt.")],
        )

    trajectory = trajectory_of(body)
    assert (trajectory.stats.turns, trajectory.stats.tool_calls) == (1, 1)
    assert trajectory.tool_calls()[0].result == "deleted out/tmp.txt"
    assert trajectory.final_answer == "Deleted out/tmp.txt."
    assert len(trajectory.trace_ids) == 2


def test_a_lone_create_agent_span_is_not_a_session(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import io

    from spanjudge.emit.report import JsonReportWriter
    from spanjudge.engine import Engine
    from spanjudge.offline import run_offline
    from tests.conftest import recorded, write_jsonl

    def body(tracer: Tracer) -> None:
        attrs = {"gen_ai.operation.name": "create_agent", "gen_ai.agent.name": "a"}
        with tracer.start_as_current_span("create_agent a", attributes=attrs):
            pass
        agent_run(tracer, "Hi.", [Say(text="Hello.")])

    path = write_jsonl(tmp_path / "t.jsonl", recorded(body))
    buf = io.StringIO()
    run_offline([str(path)], Engine(), JsonReportWriter(buf))
    sessions = json.loads(buf.getvalue())["sessions"]
    assert [(s["turns"], s["final_answer"]) for s in sessions] == [(1, "Hello.")]


def test_a_call_resumed_under_the_id_of_the_one_that_waited_is_one_call() -> None:
    # as above, both spans carrying the call's id, and the resumed run's model call given the
    # result under it: that result is the resumed call's, not the waiting one's
    delete = {"path": "out/tmp.txt"}
    asked = {"type": "tool_call", "id": "c1", "name": "delete_file", "arguments": delete}
    sent = {"type": "tool_call_response", "id": "c1", "response": "deleted out/tmp.txt"}
    history = [
        {"role": "user", "parts": [{"type": "text", "content": "Delete out/tmp.txt."}]},
        {"role": "assistant", "parts": [asked]},
        {"role": "tool", "parts": [sent]},
    ]
    answer = [{"role": "assistant", "parts": [{"type": "text", "content": "Deleted."}]}]

    def body(tracer: Tracer) -> None:
        agent_run(
            tracer,
            "Delete out/tmp.txt.",
            [Say(asks=[("c1", "delete_file", delete)]), Call("delete_file", delete, call_id="c1")],
        )
        with tracer.start_as_current_span("invoke_agent a", attributes=AGENT):
            tool_span(tracer, Call("delete_file", delete, "deleted out/tmp.txt", call_id="c1"))
            attrs = {
                "gen_ai.operation.name": "chat",
                "gen_ai.input.messages": json.dumps(history),
                "gen_ai.output.messages": json.dumps(answer),
            }
            with tracer.start_as_current_span("chat m", attributes=attrs):
                pass

    trajectory = trajectory_of(body)
    assert (trajectory.stats.turns, trajectory.stats.tool_calls) == (1, 1)
    assert trajectory.tool_calls()[0].result == "deleted out/tmp.txt"
