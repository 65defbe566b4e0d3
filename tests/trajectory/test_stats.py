"""Statistics as ARCHITECTURE.md section 4 defines them: retries, backtracks, tokens, turns."""

from __future__ import annotations

from spanjudge.trajectory.assemble import SessionMeta, assemble
from spanjudge.trajectory.steps import Step
from tests.support.steps import spans_for, tool, turn

META = SessionMeta(session_id="s", key_source="session.id", complete=True)


def test_retry_is_counted_only_after_a_failure_of_the_same_tool():
    steps = [
        turn(1, "go"),
        tool(2, "write_file", args={"path": "/bad/x"}, error="permission denied"),
        tool(3, "read_csv"),  # another tool in between does not matter
        tool(4, "write_file", args={"path": "out/x"}),  # retry
        tool(5, "write_file", args={"path": "out/y"}),  # previous call succeeded: not a retry
        tool(6, "read_csv", error="boom"),
    ]
    t = assemble(META, spans_for(steps), steps)
    assert t.stats.retries == 1 and t.retry_span_ids == (format(4, "016x"),)
    assert t.stats.errors == 2 and t.stats.tool_calls == 5


def test_failed_skill_load_retried_counts_as_retry_and_not_as_tool_call():
    load1 = Step(
        kind="skill_load",
        name="skills",
        span_id=format(2, "016x"),
        trace_id=format(1, "032x"),
        parent_span_id=format(1, "016x"),
        start_unix_nano=20,
        skill="csv-reports",
        skill_status="failed",
        error="not found",
    )
    load2 = Step(
        kind="skill_load",
        name="skills",
        span_id=format(3, "016x"),
        trace_id=format(1, "032x"),
        parent_span_id=format(1, "016x"),
        start_unix_nano=30,
        skill="csv-report",
        skill_status="loaded",
        skill_body="1. do",
    )
    steps = [turn(1, "go"), load1, load2]
    t = assemble(META, spans_for(steps), steps)
    assert t.stats.retries == 1 and t.stats.skill_loads == 2 and t.stats.tool_calls == 0
    assert t.stats.errors == 0  # errors count failed tool calls; loads are reported apart
    assert [(s.skill, s.status) for s in t.skill_loads] == [
        ("csv-reports", "failed"),
        ("csv-report", "loaded"),
    ]


def test_backtrack_is_delete_of_something_written_in_the_session():
    steps = [
        turn(1, "go"),
        tool(2, "write_file", args={"path": "./out/tmp.txt"}),
        tool(3, "delete_file", args={"path": "out/tmp.txt"}),  # undoes step 2
        tool(4, "delete_file", args={"path": "out/other.txt"}),  # never written here
        tool(5, "write_file", args={"path": "out/z"}, error="disk full"),
        tool(6, "delete_file", args={"path": "out/z"}),  # the write failed: nothing to undo
    ]
    t = assemble(META, spans_for(steps), steps)
    assert t.stats.backtracks == 1 and t.backtrack_span_ids == (format(3, "016x"),)


def test_turns_tokens_and_final_answer_per_turn():
    def model(
        n: int, parent: int, trace: int, text: str | None, fin: str, tokens: tuple[int, int]
    ) -> Step:
        return Step(
            kind="model_call",
            name="m",
            span_id=format(n, "016x"),
            trace_id=format(trace, "032x"),
            parent_span_id=format(parent, "016x"),
            start_unix_nano=n * 10,
            end_unix_nano=n * 10 + 1,
            text=text,
            finish_reason=fin,
            input_tokens=tokens[0],
            output_tokens=tokens[1],
        )

    steps = [
        turn(1, "first", trace=1),
        model(2, 1, 1, None, "tool_use", (10, 1)),
        model(3, 1, 1, "answer one", "stop", (20, 2)),
        turn(4, "second", trace=2),
        model(5, 4, 2, "answer two\n", "end_turn", (30, 3)),
    ]
    t = assemble(META, spans_for(steps), steps)
    assert t.stats.turns == 2 and [x.request for x in t.turns] == ["first", "second"]
    assert (t.stats.input_tokens, t.stats.output_tokens) == (60, 6)
    assert t.stats.model_calls == 3
    assert [x.final_answer for x in t.turns] == ["answer one", "answer two"]
    assert t.final_answer == "answer two"
    assert [s.turn for s in t.steps if s.kind == "model_call"] == [0, 0, 1]


def test_nested_agent_span_is_not_a_new_turn():
    outer = turn(1, "go")
    inner = Step(
        kind="agent_turn",
        name="sub",
        span_id=format(2, "016x"),
        trace_id=format(1, "032x"),
        parent_span_id=format(1, "016x"),
        start_unix_nano=20,
        end_unix_nano=30,
    )
    steps = [outer, inner, tool(3, "read_csv", parent=2)]
    t = assemble(META, spans_for(steps), steps)
    assert t.stats.turns == 1 and all(s.turn == 0 for s in t.steps)


def test_no_tokens_reported_is_null_not_zero():
    steps = [turn(1, "go"), tool(2, "read_csv")]
    t = assemble(META, spans_for(steps), steps)
    assert t.stats.input_tokens is None and t.stats.output_tokens is None


def test_failed_delete_undoes_nothing_and_rmdir_is_a_delete():
    steps = [
        turn(1, "go"),
        tool(2, "write_file", args={"path": "out/a"}),
        tool(3, "delete_file", args={"path": "out/a"}, error="permission denied"),
        tool(4, "mkdir", args={"path": "out/d"}),
        tool(5, "rmdir", args={"path": "out/d"}),
    ]
    t = assemble(META, spans_for(steps), steps)
    assert t.backtrack_span_ids == (format(5, "016x"),)


def test_resource_arguments_are_configurable():
    from spanjudge.config import parse_config

    effects = parse_config({"effects": {"resource_args": ["table"], "drop_rows": "delete"}}).effects
    steps = [
        turn(1, "go"),
        tool(2, "create_table", args={"table": "t1"}),
        tool(3, "drop_rows", args={"table": "t1"}),
    ]
    t = assemble(META, spans_for(steps), steps, effects=effects)
    assert t.stats.backtracks == 1
