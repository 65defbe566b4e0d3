"""`spanjudge eval`: formats, exit codes, and bad input that names file, line and field."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, cast

import jsonschema
import pytest

from spanjudge.cli import main
from spanjudge.recognition.base import DEPTH_MARK
from spanjudge.spans.otlp_json import sdk_spans_to_request
from tests.conftest import FIXTURES, load_schema, recorded, write_jsonl
from tests.support.sessions import agent_turn

try:  # which parser reads JSON texts here: orjson (1,024 levels), else json
    import orjson  # noqa: F401

    ORJSON = True
except ImportError:
    ORJSON = False


@pytest.fixture
def trace_file(tmp_path: Path) -> Path:
    spans = recorded(lambda t: (agent_turn(t, "s-required"), agent_turn(t, "s-free")))
    return write_jsonl(tmp_path / "traces.jsonl", spans)


@pytest.fixture
def expect_file(tmp_path: Path) -> Path:
    path = tmp_path / "expect.yaml"
    path.write_text("sessions:\n  s-required:\n    skills: [csv-report]\n")
    return path


def run(capsys, *argv: str) -> tuple[int, str, str]:  # type: ignore[no-untyped-def]
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_missing_required_skill_exits_1_and_table_says_why(capsys, trace_file, expect_file):  # type: ignore[no-untyped-def]
    code, out, _ = run(capsys, "eval", str(trace_file), "--expect", str(expect_file))
    assert code == 1
    assert "FAIL" in out and "required skill 'csv-report' was never loaded" in out
    assert "pass rate" in out and "coverage" in out


def test_no_fail_exits_0_and_strict_turns_not_evaluated_into_1(capsys, trace_file):  # type: ignore[no-untyped-def]
    code, out, _ = run(capsys, "eval", str(trace_file), "--show", "all")
    assert code == 0 and "NOT EVALUATED" in out and "no_expectation" in out
    code, _, _ = run(capsys, "eval", "--strict", str(trace_file))
    assert code == 1


def test_json_report_is_valid_against_the_schema(capsys, tmp_path, trace_file, expect_file):  # type: ignore[no-untyped-def]
    out_file = tmp_path / "report.json"
    code, out, _ = run(
        capsys,
        "eval",
        str(trace_file),
        "--expect",
        str(expect_file),
        "--format",
        "json",
        "--output",
        str(out_file),
    )
    assert code == 1 and out == ""
    report = json.loads(out_file.read_text())
    jsonschema.validate(report, load_schema())
    by_id = {s["session_id"]: s for s in report["sessions"]}
    assert by_id["s-required"]["expected_skills"] == ["csv-report"]
    assert by_id["s-free"]["verdicts"][0]["outcome"] == "not_evaluated"
    summary = report["summary"]["by_evaluator"]["skill_loaded"]
    assert (summary["pass"], summary["fail"], summary["not_evaluated"]) == (0, 1, 1)
    # s-free expects no skill: nothing to judge skill_loaded against, so outside coverage.
    assert summary["outside_coverage"] == {"no_expectation": 1}
    assert summary["pass_rate"] == 0.0 and summary["coverage"] == 1.0


def test_junit_has_one_testcase_per_verdict(capsys, trace_file, expect_file):  # type: ignore[no-untyped-def]
    _, out, _ = run(
        capsys, "eval", str(trace_file), "--expect", str(expect_file), "--format", "junit"
    )
    _, js, _ = run(
        capsys, "eval", str(trace_file), "--expect", str(expect_file), "--format", "json"
    )
    verdicts = [v for s in json.loads(js)["sessions"] for v in s["verdicts"]]
    root = ET.fromstring(out)
    assert len(root.findall(".//testcase")) == len(verdicts)
    assert len(root.findall(".//testcase/failure")) == sum(v["outcome"] == "fail" for v in verdicts)
    assert len(root.findall(".//testcase/skipped")) == sum(
        v["outcome"] == "not_evaluated" for v in verdicts
    )
    mine = [
        c for c in root.findall(".//testcase") if c.get("classname") == "spanjudge.skill_loaded"
    ]
    assert [c.get("name") for c in mine] == ["skill_loaded[csv-report]", "skill_loaded[session]"]
    assert mine[0].find("failure") is not None and mine[1].find("skipped") is not None


def test_bad_line_exits_2_with_file_line_field_and_no_result(capsys, tmp_path, trace_file):  # type: ignore[no-untyped-def]
    good = trace_file.read_text().strip()
    doc = json.loads(good)
    doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["spanId"] = "xyz"
    bad = tmp_path / "bad.jsonl"
    bad.write_text(good + "\n" + json.dumps(doc) + "\n")
    code, out, err = run(capsys, "eval", str(bad))
    assert code == 2 and out == ""
    assert f"{bad}:2:" in err and "spanId" in err
    assert err.count("\n") == 1


def test_skip_invalid_continues_and_counts(capsys, tmp_path, trace_file):  # type: ignore[no-untyped-def]
    good = trace_file.read_text().strip()
    bad = tmp_path / "mixed.jsonl"
    bad.write_text("{not json\n" + good + "\n")
    code, out, err = run(capsys, "eval", "--skip-invalid", "--format", "json", str(bad))
    assert code == 0
    report = json.loads(out)
    assert report["input"]["skipped"] == 1 and len(report["sessions"]) == 2
    assert f"{bad}:1:" in err and "skipped 1" in err


@pytest.mark.parametrize("skip", [False, True])
def test_a_line_nested_too_deeply_is_bad_input_on_its_line(capsys, tmp_path, trace_file, skip):  # type: ignore[no-untyped-def]
    good = trace_file.read_text().strip()
    bad = tmp_path / "deep.jsonl"
    bad.write_text(good + "\n" + "[" * 100_000 + "]" * 100_000 + "\n" + good + "\n")
    code, out, err = run(capsys, "eval", *(["--skip-invalid"] if skip else []), str(bad))
    assert f"{bad}:2: invalid JSON: values nested too deeply" in err
    assert "internal error" not in err and "Traceback" not in err
    if skip:  # the lines around it are read
        assert code == 0 and "skipped 1 invalid line" in err and "2 session(s)" in out
    else:
        assert code == 2 and out == ""


def _recorded_tool_call(tmp_path: Path, tool: str, arguments: str, result: str) -> Path:
    def body(tracer):  # type: ignore[no-untyped-def]
        with tracer.start_as_current_span(
            "invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"}
        ):
            attributes = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": tool,
                "gen_ai.tool.call.arguments": arguments,
                "gen_ai.tool.call.result": result,
            }
            with tracer.start_as_current_span(f"execute_tool {tool}", attributes=attributes):
                pass

    return write_jsonl(tmp_path / "t.jsonl", recorded(body))


@pytest.mark.parametrize(
    ("levels", "recursion_limit", "readable"),
    [(5_000, None, False), (1_000, None, ORJSON), (5_000, 20_000, False), (1_000, 20_000, True)],
    ids=["beyond-reading", "within-orjson", "raised-limit-beyond", "raised-limit-within"],
)
def test_a_value_nested_too_deeply_is_cut_where_it_can_be_written_out(  # type: ignore[no-untyped-def]
    capsys, tmp_path, request, levels, recursion_limit, readable
):
    """JSON up to 1,024 levels deep is cut at 256 levels, where a report can write it out;
    deeper, it stays the text it is, whatever the recursion limit (which test tools raise) lets
    json read. Without orjson, json at the usual limit reads less than 1,024 levels."""
    deep = "[" * levels + "]" * levels
    if recursion_limit is not None:
        request.addfinalizer(functools.partial(sys.setrecursionlimit, sys.getrecursionlimit()))
        sys.setrecursionlimit(recursion_limit)
    path = _recorded_tool_call(tmp_path, "read", deep, deep)
    _, out, err = run(capsys, "eval", "--format", "json", str(path))
    assert "failed on span" not in err and "Traceback" not in err
    (session,) = json.loads(out)["sessions"]
    (call,) = [step for step in session["steps"] if step["kind"] == "tool_call"]
    assert call["name"] == "read"
    if readable:
        cut: Any = [DEPTH_MARK]  # the 256th list holds the mark where the 257th was
        for _ in range(255):
            cut = [cut]
        assert call["arguments"] == cut and json.loads(call["result"]) == cut
    else:
        assert call["arguments"] == deep and call["result"] == deep


def test_a_deep_value_beside_a_lone_surrogate_is_read_as_any_deep_value(capsys, tmp_path):  # type: ignore[no-untyped-def]
    # The surrogate is mended wherever it sits, and the deep list is cut as it is without one.
    arguments = '{"path": "LONE", "filters": ' + "[" * 600 + "]" * 600 + "}"
    path = _recorded_tool_call(tmp_path, "read", arguments, "done")
    path.write_text(path.read_text().replace("LONE", "\\\\ud800"))
    _, out, err = run(capsys, "eval", "--format", "json", str(path))
    assert "Traceback" not in err
    (session,) = json.loads(out)["sessions"]
    (call,) = [step for step in session["steps"] if step["kind"] == "tool_call"]
    cut: Any = [DEPTH_MARK]  # the filters list is the 2nd level: 255 lists of it are kept
    for _ in range(254):
        cut = [cut]
    assert call["arguments"] == {"path": "\ufffd", "filters": cut}


def test_a_skill_named_beside_a_deep_value_is_loaded(capsys, tmp_path):  # type: ignore[no-untyped-def]
    arguments = '{"skill_name": "csv-report", "filters": ' + "[" * 300 + "]" * 300 + "}"
    skill_md = "---\nname: csv-report\ndescription: Summarise a CSV file.\n---\n# Steps\n1. read"
    path = _recorded_tool_call(tmp_path, "load_skill", arguments, skill_md)
    _, out, err = run(capsys, "eval", "--format", "json", str(path))
    assert "Traceback" not in err
    (session,) = json.loads(out)["sessions"]
    (load,) = [step for step in session["steps"] if step["kind"] == "skill_load"]
    assert load["skill"] == "csv-report"


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["eval", "nope.jsonl"], "nope.jsonl: no such file"),
        (["eval", "x.jsonl", "--config", "missing.yaml"], "cannot read configuration file"),
    ],
)
def test_usage_errors_exit_2(capsys, argv, words):  # type: ignore[no-untyped-def]
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and words in err


def test_bad_config_lists_every_problem(capsys, tmp_path, trace_file):  # type: ignore[no-untyped-def]
    config = tmp_path / "c.yaml"
    config.write_text(
        "sessions: {idle_timeout_s: soon}\nexpectations: [{when: {request_matches: '('}}]\n"
    )
    code, out, err = run(capsys, "eval", str(trace_file), "--config", str(config))
    assert code == 2 and out == ""
    assert "sessions.idle_timeout_s" in err and "expectations[0].when.request_matches" in err


def test_console_script_help_and_stdin(tmp_path, trace_file):  # type: ignore[no-untyped-def]
    help_text = subprocess.run(
        [sys.executable, "-m", "spanjudge.cli", "eval", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "exit status" in help_text and "--skip-invalid" in help_text
    done = subprocess.run(
        [sys.executable, "-m", "spanjudge.cli", "eval", "-", "--format", "json"],
        input=trace_file.read_text(),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0 and len(json.loads(done.stdout)["sessions"]) == 2


@pytest.mark.parametrize("where", ["missing-dir/report.json", "."])
def test_unwritable_output_exits_2_and_leaves_nothing(capsys, tmp_path, trace_file, where):  # type: ignore[no-untyped-def]
    target = tmp_path / where
    code, out, err = run(capsys, "eval", str(trace_file), "--output", str(target))
    assert code == 2 and out == ""
    assert "cannot write the report" in err and str(target) in err
    assert not list(tmp_path.glob("**/*.tmp"))


def test_task_entries_in_an_expectations_file_apply_to_every_run(capsys, tmp_path):  # type: ignore[no-untyped-def]
    def runs(tracer):  # type: ignore[no-untyped-def]
        for seed in ("1", "2"):
            with tracer.start_as_current_span(
                "invoke_agent shop",
                attributes={
                    "session.id": f"run-{seed}",
                    "gen_ai.operation.name": "invoke_agent",
                    "spanjudge.task.id": "csv-summary",
                    "spanjudge.run.seed": seed,
                },
            ):
                pass

    traces = write_jsonl(tmp_path / "runs.jsonl", recorded(runs))
    expect = tmp_path / "expect.yaml"
    expect.write_text("sessions:\n  'task:csv-summary':\n    skills: [csv-report]\n")
    code, out, _ = run(capsys, "eval", str(traces), "--expect", str(expect), "--format", "json")
    report = json.loads(out)
    assert code == 1
    assert [s["expected_skills"] for s in report["sessions"]] == [["csv-report"], ["csv-report"]]
    assert report["tasks"][0]["task_id"] == "csv-summary" and report["tasks"][0]["runs"] == 2


def test_empty_input_warns_and_strict_fails(capsys, tmp_path):  # type: ignore[no-untyped-def]
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    code, _, err = run(capsys, "eval", str(empty))
    assert code == 0 and "no spans found" in err
    code, _, err = run(capsys, "eval", "--strict", str(empty))
    assert code == 1 and "--strict: failing" in err


def test_junit_under_strict_fails_what_was_not_evaluated(capsys, trace_file):  # type: ignore[no-untyped-def]
    code, out, _ = run(capsys, "eval", str(trace_file), "--format", "junit", "--strict")
    root = ET.fromstring(out)
    cases = root.findall(".//testcase")
    # No skill catalogue was recorded: skill_omission could have been judged and was not.
    gaps = [c for c in cases if c.get("classname") == "spanjudge.skill_omission"]
    # No skill is expected: nothing to judge skill_loaded against, which --strict leaves alone.
    unconfigured = [c for c in cases if c.get("classname") == "spanjudge.skill_loaded"]
    assert code == 1
    assert gaps and all(c.find("failure") is not None for c in gaps)
    assert "--strict is on" in (gaps[0].find("failure").get("message") or "")  # type: ignore[union-attr]
    assert unconfigured and all(c.find("failure") is None for c in unconfigured)


def test_an_unset_api_key_env_is_a_configuration_error(capsys, tmp_path, trace_file, monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.delenv("SPANJUDGE_TEST_NO_SUCH_KEY", raising=False)
    config = tmp_path / "judges.yaml"
    config.write_text(
        "judges:\n  local: {type: openai, base_url: 'http://127.0.0.1:9/v1', model: m,"
        " api_key_env: SPANJUDGE_TEST_NO_SUCH_KEY}\n"
        "evaluators:\n  outcome: {judge: local}\n"
    )
    code, out, err = run(capsys, "eval", str(trace_file), "--config", str(config))
    assert code == 2 and out == ""
    assert (
        "judges.local.api_key_env: environment variable SPANJUDGE_TEST_NO_SUCH_KEY is unset" in err
    )


def test_claude_codes_logs_beside_its_traces_leave_its_verdicts_as_they_are(capsys):  # type: ignore[no-untyped-def]
    # Claude Code's own events (claude_code.tool_result, ...) name the spans they belong to; read
    # with the traces, they change no verdict the traces give.
    folder = FIXTURES / "claude_code"
    expect = str(folder / "expectations.yaml")
    traces = [str(p) for p in sorted(folder.glob("*.jsonl"))]
    logs = [str(p) for p in sorted(folder.glob("*.logs.ndjson"))]
    verdicts = []
    for inputs in (traces, traces + logs):
        code, out, _ = run(capsys, "eval", *inputs, "--expect", expect, "--format", "json")
        assert code in (0, 1)
        report = json.loads(out)
        verdicts.append(
            sorted(
                (s["session_id"], v["evaluator"], v["outcome"], v["score"], v["reason"])
                for s in report["sessions"]
                for v in s["verdicts"]
            )
        )
    assert verdicts[0] and verdicts[1] == verdicts[0]
    assert report["input"]["log_records"] > 0  # the logs were read


def test_a_bad_log_record_is_named_by_file_line_and_field(capsys, tmp_path):  # type: ignore[no-untyped-def]
    record = {
        "timeUnixNano": "1795955997889000000",
        "traceId": "0af7651916cd43dd8448eb211c80319c",
        "spanId": "abc",
        "eventName": "gen_ai.user.message",
    }
    logs = tmp_path / "logs.jsonl"
    logs.write_text(json.dumps({"resourceLogs": [{"scopeLogs": [{"logRecords": [record]}]}]}))
    code, out, err = run(capsys, "eval", str(logs))
    assert code == 2 and out == ""
    assert f"{logs}:1: resourceLogs[0].scopeLogs[0].logRecords[0].spanId: must be 16 hex" in err


def test_spans_with_no_agent_activity_are_not_called_no_spans(capsys, tmp_path):  # type: ignore[no-untyped-def]
    def body(tracer):  # type: ignore[no-untyped-def]
        attributes = {"http.request.method": "GET", "http.route": "/health"}
        with (
            tracer.start_as_current_span("GET /health", attributes=attributes),
            tracer.start_as_current_span("SELECT 1", attributes={"db.system": "sqlite"}),
        ):
            pass

    traces = write_jsonl(tmp_path / "web.jsonl", recorded(body))
    code, _, err = run(capsys, "eval", str(traces))
    assert code == 0 and "no spans found" not in err
    assert f"read 2 span(s) from {traces}, none recognised as an agent's" in err
    code, _, err = run(capsys, "eval", "--strict", str(traces))
    assert code == 1 and "--strict: failing" in err


def test_an_otlp_logs_file_alone_says_its_records_have_no_spans(capsys, tmp_path):  # type: ignore[no-untyped-def]
    logs = FIXTURES / "claude_code" / "claude_code.logs.ndjson"  # the real Claude Code's logs
    code, out, err = run(capsys, "eval", str(logs), "--format", "json")
    assert code == 0
    report = json.loads(out)
    assert report["sessions"] == []
    unread = report["input"]["log_records_unread"]
    # every record that names a span names one that is not in the input; the rest name none
    assert unread["span_not_seen"] == report["input"]["log_records"] > 0
    assert unread["no_span_context"] > 0
    assert "no spans found" in err and "only log records: give the traces too" in err


def _lone_surrogates_trace(tmp_path: Path) -> Path:
    """A turn whose session id, and whose expected skill (inside JSON text in an attribute),
    hold a lone surrogate: `\\ud800` escapes, valid JSON, as writers that do not check their
    strings write them (Python's `json.dumps` of a file name read with `surrogateescape`)."""

    def body(tracer):  # type: ignore[no-untyped-def]
        attributes = {
            "session.id": "s-LONE",
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "shop",
            "spanjudge.expected_skills": json.dumps(["csv-NESTED"]),
        }
        with tracer.start_as_current_span("invoke_agent shop", attributes=attributes):
            pass

    path = write_jsonl(tmp_path / "traces.jsonl", recorded(body))
    text = path.read_text()
    assert "s-LONE" in text and "csv-NESTED" in text
    path.write_text(text.replace("LONE", "\\ud800").replace("NESTED", "\\\\udc00"))
    return path


@pytest.mark.parametrize("fmt", ["json", "junit", "html", "table"])
def test_lone_surrogates_in_a_trace_are_reported_as_replacement_characters(  # type: ignore[no-untyped-def]
    capsys, tmp_path, fmt
):
    path = _lone_surrogates_trace(tmp_path)
    report = tmp_path / f"report.{fmt}"
    code, _, err = run(
        capsys, "eval", str(path), "--format", fmt, "--show", "all", "--output", str(report)
    )
    assert code == 1, err  # the expected skill was never loaded: a failing verdict, no crash
    text = report.read_bytes().decode("utf-8")  # the report is UTF-8 text
    assert "s-\ufffd" in text and "csv-\ufffd" in text
    if fmt == "json":
        document = json.loads(text)
        jsonschema.validate(document, load_schema())
        (session,) = document["sessions"]
        assert session["session_id"] == "s-\ufffd"
        (loaded,) = [v for v in session["verdicts"] if v["evaluator"] == "skill_loaded"]
        assert loaded["outcome"] == "fail" and loaded["target"]["skill"] == "csv-\ufffd"
    if fmt == "junit":
        cases = ET.fromstring(text).iter("testcase")
        failed = [c.get("name") for c in cases if c.find("failure") is not None]
        assert failed == ["skill_loaded[csv-\ufffd]"]


def _skill_loaded(capsys, tmp_path: Path, path: Path, *options: str) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """The one `skill_loaded` verdict of ``path``'s session, after an `eval` with ``options``
    that passed."""
    report = tmp_path / "report.json"
    code, _, err = run(capsys, "eval", str(path), *options, "--format", "json", "-o", str(report))
    assert code == 0, err
    (session,) = json.loads(report.read_bytes().decode("utf-8"))["sessions"]
    (loaded,) = [v for v in session["verdicts"] if v["evaluator"] == "skill_loaded"]
    return cast(dict[str, Any], loaded)


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_a_lone_surrogate_in_an_expectations_file_names_the_skill_the_trace_loaded(  # type: ignore[no-untyped-def]
    capsys, tmp_path, suffix
):
    # The trace's lone surrogate and the expectations' are both read as U+FFFD: they still match.
    skill_md = "---\nname: csv-LONE\ndescription: Summarise a CSV file.\n---\n# Steps\n1. read"
    path = _recorded_tool_call(tmp_path, "load_skill", '{"skill_name": "csv-LONE"}', skill_md)
    path.write_text(path.read_text().replace("LONE", "\\ud800"))
    expect = tmp_path / f"expect{suffix}"
    if suffix == ".json":
        expect.write_text('{"sessions": {"*": {"skills": ["csv-\\ud800"]}}}')
    else:
        expect.write_text('sessions:\n  "*":\n    skills: ["csv-\\ud800"]\n')
    loaded = _skill_loaded(capsys, tmp_path, path, "--expect", str(expect))
    assert loaded["outcome"] == "pass" and loaded["target"]["skill"] == "csv-\ufffd"


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_a_character_escaped_as_a_surrogate_pair_in_an_expectations_file_is_that_character(  # type: ignore[no-untyped-def]
    capsys, tmp_path, suffix
):
    # `json.dumps` escapes a character beyond the BMP as a pair; YAML reads such a file too.
    skill_md = "---\nname: csv-\U0001f600\ndescription: Summarise a CSV.\n---\n# Steps\n1. read"
    arguments = json.dumps({"skill_name": "csv-\U0001f600"})
    path = _recorded_tool_call(tmp_path, "load_skill", arguments, skill_md)
    expect = tmp_path / f"expect{suffix}"
    expect.write_text(json.dumps({"sessions": {"*": {"skills": ["csv-\U0001f600"]}}}))
    assert "\\ud83d\\ude00" in expect.read_text()
    loaded = _skill_loaded(capsys, tmp_path, path, "--expect", str(expect))
    assert loaded["outcome"] == "pass" and loaded["target"]["skill"] == "csv-\U0001f600"


def test_a_lone_surrogate_in_a_skills_directory_names_the_skill_the_trace_loaded(  # type: ignore[no-untyped-def]
    capsys, tmp_path
):
    skill_dir = tmp_path / "skills" / "csv"
    skill_dir.mkdir(parents=True)
    skill_md = '---\nname: "csv-\\ud800"\ndescription: Summarise a CSV file.\n---\n# Steps\n1. read'
    (skill_dir / "SKILL.md").write_text(skill_md)
    config = tmp_path / "spanjudge.yaml"
    config.write_text(f"skills:\n  paths: [{tmp_path / 'skills'}]\n")
    arguments = '{"skill_name": "csv-LONE"}'
    path = _recorded_tool_call(tmp_path, "load_skill", arguments, "# Steps\n1. read")
    path.write_text(path.read_text().replace("LONE", "\\\\ud800"))
    expect = tmp_path / "expect.yaml"
    expect.write_text('sessions:\n  "*":\n    skills: ["csv-\\ud800"]\n')
    loaded = _skill_loaded(capsys, tmp_path, path, "--config", str(config), "--expect", str(expect))
    assert loaded["outcome"] == "pass" and loaded["target"]["skill"] == "csv-\ufffd"


@pytest.mark.parametrize("option", ["--config", "--expect"])
def test_a_file_that_is_not_utf8_is_named_with_its_first_bad_byte(  # type: ignore[no-untyped-def]
    capsys, tmp_path, trace_file, option
):
    path = tmp_path / "settings.yaml"
    path.write_bytes(b"sessions:\n  idle_timeout_s: 60 # caf\xe9\n")  # Latin-1: 0xe9 at 10 + 26
    code, out, err = run(capsys, "eval", str(trace_file), option, str(path))
    assert code == 2 and out == ""
    assert str(path) in err and "not UTF-8 text: byte 0xe9 at offset 36" in err


@pytest.mark.parametrize("suffix", [".jsonl", ".pb"])
def test_bytes_that_are_not_utf8_in_a_string_are_reported_as_u_fffd(  # type: ignore[no-untyped-def]
    capsys, tmp_path, suffix
):
    # The Collector's file exporter writes a string's bytes as it received them, UTF-8 or not
    # (here a lone surrogate's bytes): the file is read, each such byte as U+FFFD. In protobuf
    # the runtime refuses a whole message for one such string.
    spans = recorded(lambda t: agent_turn(t, "s-SUR"))
    path = tmp_path / f"traces{suffix}"
    if suffix == ".pb":
        path.write_bytes(sdk_spans_to_request(spans).SerializeToString())
    else:
        write_jsonl(path, spans)
    data = path.read_bytes()
    assert data.count(b"SUR") == 1
    path.write_bytes(data.replace(b"SUR", b"\xed\xa0\x80"))
    report = tmp_path / "report.json"
    code, _, err = run(capsys, "eval", str(path), "--format", "json", "-o", str(report))
    assert code == 0, err
    (session,) = json.loads(report.read_bytes().decode("utf-8"))["sessions"]
    assert session["session_id"] == "s-\ufffd\ufffd\ufffd" and session["verdicts"]
