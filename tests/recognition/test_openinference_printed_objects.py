"""How an OpenInference run's answer is chosen where a run output printed an object: only
this preset's own turn outputs give way to the model's last text, and only when they are a
repr (open with `Name(field=` and run to the closing parenthesis, or cut short with "...")."""

from __future__ import annotations

from typing import Any

from spanjudge.recognition.openinference import OpenInferenceRecogniser
from spanjudge.trajectory.steps import Step


def _step(kind: Any, preset: str = "openinference", **fields: Any) -> Step:
    base: dict[str, Any] = {"name": kind, "span_id": f"s-{kind}-{preset}", "trace_id": "t1"}
    return Step(kind=kind, preset=preset, **(base | fields))


def test_a_printed_object_of_another_preset_is_left_alone() -> None:
    steps = [
        _step("agent_turn", end_unix_nano=9),
        _step("model_call", text="The total is 280.", finish_reason="stop", end_unix_nano=5),
        _step("final_answer", preset="genai", text="Result(total=280)", end_unix_nano=9),
    ]
    answers = [
        (s.preset, s.text)
        for s in OpenInferenceRecogniser().finalise(steps, [])
        if s.kind == "final_answer"
    ]
    assert answers == [("genai", "Result(total=280)")]


def test_a_sentence_that_opens_like_a_call_is_no_printed_object() -> None:
    said = "connect(host='db') is the call to make, with the pool size raised to 40."
    steps = [
        _step("agent_turn", end_unix_nano=9),
        _step("final_answer", text=said, end_unix_nano=9),
        _step("model_call", text="Use connect.", finish_reason="stop", end_unix_nano=5),
    ]
    answers = [
        s.text for s in OpenInferenceRecogniser().finalise(steps, []) if s.kind == "final_answer"
    ]
    assert answers == [said]
