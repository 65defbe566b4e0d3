"""Skill loads, their status and tool attempts come from evidence, whatever the tool is called.

Each test builds its spans with a real SDK tracer.
"""

from __future__ import annotations

import pytest
from opentelemetry.trace import Tracer

from tests.recognition.agent_spans import SKILL_MD, Call, Say, agent_run, loads, trajectory_of

REQUEST = "Build the sales report."


def _run(*actions: Say | Call, failed: bool = False) -> object:
    return trajectory_of(lambda t: agent_run(t, REQUEST, actions, failed=failed))


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("exec_command", {"cmd": "cat .agents/csv-report/SKILL.md"}),
        ("exec_command", {"cmd": "sed -n '1,120p' .agents/csv-report/SKILL.md"}),
        ("bash", {"command": "head -n 200 /home/me/skills/csv-report/SKILL.md | less"}),
        ("run_shell_command", {"script": "cd /tmp && cat ./skills/csv-report/SKILL.md"}),
        ("shell", {"command": ["bash", "-lc", "cat skills/csv-report/SKILL.md"]}),
        ("fs_view", {"target": "/skills/csv-report/SKILL.md"}),
    ],
)
def test_a_skill_md_read_is_a_load_whatever_the_tool_is_called(tool: str, args: object) -> None:
    out = f"Chunk ID: 1\nProcess exited with code 0\nOutput:\n{SKILL_MD}"
    trajectory = _run(Say(asks=[("c1", tool, args)]), Call(tool, args, out, call_id="c1"))
    assert loads(trajectory) == [("csv-report", "loaded")]  # type: ignore[arg-type]
    load = trajectory.skill_loads[0]  # type: ignore[attr-defined]
    assert load.body.startswith("---\nname: csv-report") and load.body_source == "trace"
    assert trajectory.stats.tool_calls == 0  # type: ignore[attr-defined]


def test_writing_or_listing_a_skill_md_is_no_load() -> None:
    trajectory = _run(
        Call("write_file", {"path": "skills/x/SKILL.md", "content": SKILL_MD}, "ok"),
        Call("exec_command", {"cmd": "ls .agents/*/SKILL.md && grep -l csv x/SKILL.md"}, "a"),
        Call("bash", {"command": "cat > skills/new/SKILL.md <<EOF\nhi\nEOF"}, ""),
        Call("bash", {"command": "sed -i 's/a/b/' skills/x/SKILL.md"}, ""),
        Call("bash", {"command": "cat skills/*/SKILL.md | wc -l"}, "40"),
    )
    assert loads(trajectory) == []  # type: ignore[arg-type]
    assert trajectory.stats.tool_calls == 5  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "result",
    [
        "cat: .agents/csv-reports/SKILL.md: No such file or directory",
        "Chunk ID: 2\nWall time: 0.01 seconds\nProcess exited with code 1\nOutput:\ncat: missing",
        '{"exit_code": 1, "stdout": "", "stderr": "cat: x: No such file or directory"}',
    ],
)
def test_a_failed_shell_read_is_a_failed_load_though_the_span_is_ok(result: str) -> None:
    trajectory = _run(Call("exec_command", {"cmd": "cat .agents/csv-reports/SKILL.md"}, result))
    assert loads(trajectory) == [("csv-reports", "failed")]  # type: ignore[arg-type]


def test_an_error_payload_with_text_after_it_is_a_failed_load() -> None:
    result = '{"status": "error", "error": "skill csv-report is disabled"}\nTry another skill.'
    trajectory = _run(Call("load_skill", {"name": "csv-report"}, result))
    assert loads(trajectory) == [("csv-report", "failed")]  # type: ignore[arg-type]
    assert "disabled" in (trajectory.skill_loads[0].error or "")  # type: ignore[attr-defined]


def test_an_argument_validation_error_is_a_failed_load() -> None:
    args = {"cmd": "cat .agents/csv-report/SKILL.md", "yield_time_ms": -5}
    trajectory = _run(Call("exec_command", args, "Invalid tool arguments for yield_time_ms."))
    assert loads(trajectory) == [("csv-report", "failed")]  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["", "   ", "<REDACTED>", "[redacted]"])
def test_a_load_without_a_usable_skill_name_is_unresolved_never_loaded(name: str) -> None:
    trajectory = _run(Call("load_skill", {"name": name}, {"instructions": "do things"}))
    assert [status for _, status in loads(trajectory)] == ["unresolved"]  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["", "   "])
def test_a_load_without_a_usable_name_that_returns_a_skill_md_loads_that_skill(name: str) -> None:
    trajectory = _run(Call("load_skill", {"name": name}, SKILL_MD))
    assert loads(trajectory) == [("csv-report", "loaded")]  # type: ignore[arg-type]


def test_an_unknown_loader_is_recognised_from_the_body_it_returns() -> None:
    trajectory = _run(
        Call("fetch_playbook", {"topic": "sales"}, SKILL_MD),
        Call("fetch_playbook", {"topic": "weather"}, "No playbook matches 'weather'."),
    )
    assert loads(trajectory) == [("csv-report", "loaded")]  # type: ignore[arg-type]
    assert trajectory.stats.tool_calls == 1  # type: ignore[attr-defined]


def test_a_loader_naming_a_catalogue_skill_is_a_load_and_its_body_may_come_later() -> None:
    catalogue = (
        "### Available skills\n- csv-report: Summarise a CSV file. (file: .agents/csv-report)"
    )
    trajectory = _run(
        Say(system=catalogue, asks=[("c1", "load_capability", {"name": "csv-report"})]),
        Call("load_capability", {"name": "csv-report"}, "Capability enabled.", call_id="c1"),
        Say(text="Done."),
    )
    assert loads(trajectory) == [("csv-report", "loaded")]  # type: ignore[arg-type]
    assert [e.name for e in trajectory.catalogue] == ["csv-report"]  # type: ignore[attr-defined]
    assert trajectory.catalogue[0].description == "Summarise a CSV file."  # type: ignore[attr-defined]


def test_a_lazy_load_and_the_read_of_its_skill_md_are_one_activation() -> None:
    trajectory = _run(
        Say(asks=[("c1", "load_skill", {"skill_name": "csv-report"})]),
        Call("load_skill", {"skill_name": "csv-report"}, {"status": "loaded"}, call_id="c1"),
        Say(asks=[("c2", "exec_command", {"cmd": "cat .agents/csv-report/SKILL.md"})]),
        Call("exec_command", {"cmd": "cat .agents/csv-report/SKILL.md"}, SKILL_MD, call_id="c2"),
        Say(text="The total is 3."),
    )
    assert loads(trajectory) == [("csv-report", "loaded")]  # type: ignore[arg-type]
    assert trajectory.stats.skill_loads == 1  # type: ignore[attr-defined]
    assert trajectory.skill_loads[0].tool_name == "load_skill"  # type: ignore[attr-defined]
    assert "Read the CSV" in (trajectory.skill_loads[0].body or "")  # type: ignore[attr-defined]


def test_a_call_the_model_asked_for_that_never_ran_is_a_failed_attempt_and_then_a_retry() -> None:
    trajectory = _run(
        Say(asks=[("c1", "load_skill", {"skill": 5})]),  # rejected by argument validation
        Say(asks=[("c2", "load_skill", {"name": "csv-report"})]),
        Call("load_skill", {"name": "csv-report"}, {"instructions": "x"}, call_id="c2"),
        Say(text="Done."),
    )
    calls = [(s.name, s.failed) for s in trajectory.steps if s.kind in ("tool_call", "skill_load")]  # type: ignore[attr-defined]
    assert calls == [("load_skill", True), ("load_skill", False)]
    assert trajectory.stats.retries == 1  # type: ignore[attr-defined]
    assert trajectory.final_answer == "Done."  # type: ignore[attr-defined]


def test_a_tool_calling_output_is_never_the_answer_and_an_aborted_run_has_none() -> None:
    trajectory = _run(
        Say(text="Let me look up the weather first.", asks=[("c1", "get_weather", {})]),
        Call("get_weather", {}, "sunny", call_id="c1"),
        failed=True,
    )
    assert trajectory.final_answer is None  # type: ignore[attr-defined]
    trajectory = _run(Say(text="Checking.", asks=[("c1", "get_weather", {})]))
    assert trajectory.final_answer is None  # type: ignore[attr-defined]


def _wrapped_model_call(tracer: Tracer) -> None:
    with tracer.start_as_current_span(
        "invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"}
    ):
        usage = {"gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 7}
        outer = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "g", **usage}
        with tracer.start_as_current_span("call_llm", attributes=outer):
            inner = {"gen_ai.operation.name": "generate_content", "gen_ai.request.model": "g"}
            with tracer.start_as_current_span("generate_content g", attributes={**inner, **usage}):
                pass


def test_a_wrapper_model_span_and_the_call_it_wraps_are_one_call() -> None:
    trajectory = trajectory_of(_wrapped_model_call)
    assert trajectory.stats.model_calls == 1
    assert (trajectory.stats.input_tokens, trajectory.stats.output_tokens) == (100, 7)


def _mcp_call(tracer: Tracer) -> None:
    with tracer.start_as_current_span(
        "invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"}
    ):
        client = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather"}
        with tracer.start_as_current_span("execute_tool get_weather", attributes=client):
            server = {**client, "gen_ai.tool.call.result": "sunny", "mcp.method.name": "tools/call"}
            with tracer.start_as_current_span("tools/call get_weather", attributes=server):
                pass


def test_an_mcp_client_span_and_its_server_span_are_one_tool_call() -> None:
    trajectory = trajectory_of(_mcp_call)
    assert trajectory.stats.tool_calls == 1
    assert trajectory.tool_calls()[0].result == "sunny"


def test_a_rejected_call_with_unparsable_arguments_still_names_the_catalogue_skill() -> None:
    catalogue = "<available_skills><skill><name>csv-report</name></skill></available_skills>"
    trajectory = _run(
        Say(system=catalogue, asks=[("c1", "load_skill", '{"name": csv-report')]),
        Say(asks=[("c2", "load_skill", {"name": "csv-report"})]),
        Call("load_skill", {"name": "csv-report"}, {"instructions": "x"}, call_id="c2"),
    )
    assert loads(trajectory) == [("csv-report", "failed"), ("csv-report", "loaded")]  # type: ignore[arg-type]
    assert trajectory.stats.retries == 1  # type: ignore[attr-defined]


def test_a_body_handed_over_in_a_later_message_completes_the_call_that_asked_for_it() -> None:
    def body(tracer: Tracer) -> None:
        import json

        from tests.recognition.agent_spans import tool_span

        attrs = {"gen_ai.operation.name": "invoke_agent"}
        with tracer.start_as_current_span("invoke_agent a", attributes=attrs):
            tool_span(tracer, Call("load_capability", {"id": "csv-report"}, "ok", call_id="c1"))
            history = [
                {"role": "user", "parts": [{"type": "text", "content": REQUEST}]},
                {"role": "user", "parts": [{"type": "text", "content": SKILL_MD}]},
            ]
            chat = {"gen_ai.operation.name": "chat", "gen_ai.input.messages": json.dumps(history)}
            with tracer.start_as_current_span("chat m", attributes=chat):
                pass

    trajectory = trajectory_of(body)
    assert loads(trajectory) == [("csv-report", "loaded")]
    assert trajectory.skill_loads[0].tool_name == "load_capability"
    assert "Read the CSV" in (trajectory.skill_loads[0].body or "")


def test_a_catalogue_name_under_any_argument_is_a_load_attempt_when_the_call_is_refused() -> None:
    catalogue = "### Available skills\n- csv-report: Summarise a CSV file."
    refused = Call(
        "fetch_playbook", {"topic": "csv-report"}, "Playbook csv-report is not available."
    )
    trajectory = _run(Say(system=catalogue, text="."), refused)
    assert loads(trajectory) == [("csv-report", "failed")]  # type: ignore[arg-type]
    # an ordinary answer to a call that happens to mention the name is no load
    plain = Call("search_logs", {"query": "csv-report"}, "3 lines")
    assert loads(_run(Say(system=catalogue, text="."), plain)) == []  # type: ignore[arg-type]


def test_error_type_on_a_span_left_ok_fails_the_load() -> None:
    call = Call("load_skill", {"name": "csv-report"}, SKILL_MD, attrs={"error.type": "tool_error"})
    trajectory = _run(call)
    assert loads(trajectory) == [("csv-report", "failed")]  # type: ignore[arg-type]
    assert trajectory.skill_loads[0].body is None  # type: ignore[attr-defined]


def test_front_matter_without_a_description_is_no_skill() -> None:
    page = "---\nname: Home\nlayout: page\n---\n# Welcome\n"
    trajectory = _run(Call("read_page", {"slug": "home"}, page))
    assert loads(trajectory) == []  # type: ignore[arg-type]


def test_a_nan_token_count_is_no_count_and_costs_nothing_else() -> None:
    trajectory = _run(Say(text="Done.", tokens=(float("nan"), 5)))  # type: ignore[arg-type]
    assert trajectory.stats.model_calls == 1  # type: ignore[attr-defined]
    assert trajectory.stats.input_tokens is None  # type: ignore[attr-defined]
    assert trajectory.final_answer == "Done."  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "result",
    [
        {"type": "text", "text": "Error executing tool load_skill"},
        "Error: Argument parsing failed.",
        "Traceback (most recent call last):\n  File ...\nKeyError: 'csv-report'",
    ],
)
def test_a_result_that_opens_with_an_error_is_a_failed_load(result: object) -> None:
    trajectory = _run(Call("load_skill", {"name": "csv-report"}, result))
    assert loads(trajectory) == [("csv-report", "failed")]  # type: ignore[arg-type]


def test_an_error_in_the_output_a_result_wraps_with_the_call_is_the_calls_failure() -> None:
    """The tool's output beside the call's own name and input: an error there is the call's,
    whatever the flag beside it says; the same fields beside another call's name and input
    are data the tool returned."""
    args = {"path": "/reports/r.md"}
    output = {"status": "error", "error": "permission denied: /reports/r.md"}

    def wrapped(name: str, given: object) -> dict[str, object]:
        return {"tool": name, "request": {"kwargs": given}, "output": output, "is_error": False}

    failed = _run(Call("write_file", args, wrapped("write_file", args)))
    (step,) = failed.tool_calls()  # type: ignore[attr-defined]
    assert step.error == "permission denied: /reports/r.md"
    echoed = _run(Call("audit_log", args, wrapped("write_file", {"path": "/other.md"})))
    (step,) = echoed.tool_calls()  # type: ignore[attr-defined]
    assert step.error is None


@pytest.mark.parametrize(
    ("output", "expected"),
    [("Skill 'csv-report' not found", "failed"), (SKILL_MD, "loaded")],
)
def test_a_wrapped_loaders_answer_is_read_among_the_records_other_fields(
    output: str, expected: str
) -> None:
    """A loader's result that wraps its answer with the call's record and further fields (a
    call id, a type): the load is what the answer says, never one of those fields."""
    args = {"name": "csv-report"}
    result = {"call_id": "call_1", "type": "tool_result", "tool": "load_skill", "args": args}
    trajectory = _run(Call("load_skill", args, {**result, "output": output}))
    assert loads(trajectory) == [("csv-report", expected)]  # type: ignore[arg-type]
    if expected == "loaded":
        (load,) = trajectory.skill_loads  # type: ignore[attr-defined]
        assert load.body_recorded


def test_a_skill_md_in_a_results_content_blocks_is_the_loads_body() -> None:
    """The tool's content as text blocks (MCP's result, a framework's tool response): the
    SKILL.md in them is the body loaded, as if the result were the text itself."""
    args = {"skill_name": "csv-report"}
    result = {"content": [{"type": "text", "text": SKILL_MD}], "state": "success", "id": "c1"}
    trajectory = _run(Call("load_skill", args, result))
    assert loads(trajectory) == [("csv-report", "loaded")]  # type: ignore[arg-type]
    (load,) = trajectory.skill_loads  # type: ignore[attr-defined]
    assert load.body_recorded
