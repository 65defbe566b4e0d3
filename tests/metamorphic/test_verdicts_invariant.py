"""Metamorphic: writing a fixture session differently (its catalogue in another layout, its tools
under a namespace, its attributes and spans in another order, its session id on the resource,
on every span, on root spans only or under a namespace of its own, its message content in span
events or in OTLP log records, its answers in several parts, its model outputs as a chat
completion's choices or as choices holding the model's own content object, its tool calls seen
only in the next input's history) leaves every verdict as it was.

Every fixture file of every framework is evaluated as `spanjudge eval FILE --expect
expectations.yaml` would (with each session's calls, from its generator's log, as its reference
trajectory), once as recorded and once per transformation; a failure names the
transformation, the session and the verdict that moved.
"""

from __future__ import annotations

import io
import json
import random
from collections.abc import Callable
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from spanjudge.config import parse_config
from spanjudge.emit.report import JsonReportWriter
from spanjudge.engine import Engine
from spanjudge.expectations import ExpectationResolver, SessionEntry, load_expectations_file
from spanjudge.offline import run_offline
from spanjudge.trajectory.reference import parse_reference
from tests.metamorphic.log_records import choices_as_contents, content_to_log_records
from tests.metamorphic.transforms import (
    content_to_chat_events,
    content_to_events,
    descriptions_only_in_definitions,
    descriptions_only_on_tool_spans,
    finish_reasons_as_enum_names,
    map_strings,
    namespace_tools,
    outputs_as_chat_choices,
    rerender_catalogue,
    roles_as_compound_words,
    roles_in_stem_keys,
    session_id_as_keyword,
    session_id_as_metadata,
    session_id_namespaced,
    session_id_on_every_span,
    session_id_on_resource,
    session_id_on_root_spans,
    shuffle_order,
    split_answers,
    tool_calls_only_in_input_history,
    tool_content_only_in_messages,
    turn_inputs_by_name,
)
from tests.support.call_logs import references
from tests.support.catalogue_layouts import LAYOUTS, render

FIXTURES = Path(__file__).parents[2] / "fixtures"
FILES = sorted(str(p.relative_to(FIXTURES)) for p in FIXTURES.glob("*/*.jsonl"))
# One namespace form per file, in turn, so that every form is met and every file is run once.
PREFIXES = ("ops-", "plugin.", "mcp__server__", "server/", "server:")
Verdicts = dict[str, list[tuple[str, str, str, str | None]]]


def _report(path: Path, lines: list[str]) -> dict[str, Any]:
    engine = Engine(parse_config({}))
    expectations = path.parent / "expectations.yaml"
    entries = load_expectations_file(str(expectations)) if expectations.exists() else []
    # each session's calls, from its generator's log, as a trajectory_match reference
    calls = references(path.parent) if (path.parent / "scenarios.json").exists() else {}
    exact = {e.pattern for e in entries}
    entries = [
        replace(e, trajectory=parse_reference(calls[e.pattern], e.pattern, []))
        if e.pattern in calls
        else e
        for e in entries
    ]
    entries += [
        SessionEntry(pattern=sid, trajectory=parse_reference(ref, sid, []))
        for sid, ref in calls.items()
        if sid not in exact
    ]
    engine.add_expectations(ExpectationResolver(entries))
    buf = io.StringIO()
    run_offline(
        [str(path)] if not lines else [_written(path, lines)], engine, JsonReportWriter(buf)
    )
    report: dict[str, Any] = json.loads(buf.getvalue())
    return report


_TMP: list[Path] = []


def _written(path: Path, lines: list[str]) -> str:
    out = _TMP[0] / f"{path.parent.name}-{path.name}"
    out.write_text("\n".join(lines) + "\n")
    return str(out)


def _verdicts(report: dict[str, Any]) -> Verdicts:
    return {
        s["session_id"]: sorted(
            (
                v["evaluator"],
                json.dumps(v["target"], sort_keys=True),
                v["outcome"],
                v["reason"],
            )
            for v in s["verdicts"]
        )
        for s in report["sessions"]
    }


@cache
def _original(name: str) -> tuple[dict[str, Any], Verdicts]:
    report = _report(FIXTURES / name, [])
    return report, _verdicts(report)


def _requests(name: str) -> list[dict[str, Any]]:
    text = (FIXTURES / name).read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _assert_unchanged(transformation: str, name: str, requests: list[dict[str, Any]]) -> None:
    _, before = _original(name)
    assert before, f"{name}: no session"
    after = _verdicts(_report(FIXTURES / name, [json.dumps(r) for r in requests]))
    assert sorted(after) == sorted(before), f"{transformation}: {name}: sessions differ"
    for session, verdicts in before.items():
        moved = [v for v in verdicts if v not in after[session]]
        came = [v for v in after[session] if v not in verdicts]
        assert not moved and not came, (
            f"{transformation} moved verdicts of session {session} ({name}):\n"
            f"  before: {moved}\n  after:  {came}"
        )


@pytest.fixture(autouse=True)
def _tmp(tmp_path: Path) -> None:
    _TMP[:] = [tmp_path]


def _catalogue(name: str) -> tuple[tuple[str, str], ...]:
    report, _ = _original(name)
    found: dict[str, str] = {}
    for session in report["sessions"]:
        for entry in session["catalogue"]:
            found.setdefault(entry["name"], entry["description"] or "")
    return tuple(found.items())


# Each file is re-rendered in three layouts, the layouts taken in turn across the files: every
# layout meets several frameworks and the suite stays quick.
LAYOUT_CASES = [
    (layout, name)
    for i, name in enumerate(FILES)
    for layout in (sorted(LAYOUTS) * 3)[3 * i : 3 * i + 3]
]


@pytest.mark.parametrize(("layout", "name"), LAYOUT_CASES)
def test_catalogue_in_another_layout(layout: str, name: str) -> None:
    entries = _catalogue(name)
    if not entries:
        pytest.skip(f"{name} records no catalogue")
    requests = _requests(name)
    change = rerender_catalogue(layout, entries)
    for request in requests:
        map_strings(request, change, span_names=False)
    assert requests != _requests(name), f"{layout}: the catalogue of {name} was not found"
    _assert_unchanged(f"catalogue as {layout}", name, requests)


def _tools(name: str) -> list[str]:
    report, _ = _original(name)
    return sorted(
        {
            step["name"]
            for session in report["sessions"]
            for step in session["steps"]
            if step["kind"] in ("tool_call", "skill_load")
        }
    )


@pytest.mark.parametrize("name", FILES)
def test_catalogue_with_locations_beside_a_list_of_tools(name: str) -> None:
    """The catalogue written with each skill's location after its name, and followed by a list
    of the session's own tools, announced as tools for skills (as an agent library's
    instructions list its skill tools): the tools are no skills, the verdicts are the same."""
    entries, tools = _catalogue(name), _tools(name)
    if not entries or not tools:
        pytest.skip(f"{name} records no catalogue or no tool call")
    rendered = render("markdown_list_with_locations", entries)
    listed = "\n".join(
        f"- {tool}: {'list available skills' if i == 0 else f'call {tool}'}"
        for i, tool in enumerate(tools)
    )
    rerendered = rerender_catalogue("markdown_list_with_locations", entries)

    def change(text: str) -> str:
        out = rerendered(text)
        return out.replace(
            rendered, f"{rendered}\n\nUse these tools to work with skills:\n{listed}"
        )

    requests = _requests(name)
    for request in requests:
        map_strings(request, change, span_names=False)
    assert requests != _requests(name), f"the catalogue of {name} was not found"
    _assert_unchanged("catalogue with locations beside a list of tools", name, requests)


@pytest.mark.parametrize("name", FILES)
def test_tool_names_under_a_namespace(name: str) -> None:
    report, _ = _original(name)
    tools = frozenset(
        step["name"]
        for session in report["sessions"]
        for step in session["steps"]
        if step["kind"] in ("tool_call", "skill_load")
    )
    if not tools:
        pytest.skip(f"{name} records no tool call")
    prefix = PREFIXES[FILES.index(name) % len(PREFIXES)]
    requests = _requests(name)
    change = namespace_tools(prefix, tools)
    for request in requests:
        map_strings(request, change, span_names=True)
    assert requests != _requests(name), f"{prefix}: no tool name of {name} was found"
    _assert_unchanged(f"tool names as {prefix}<tool>", name, requests)


@pytest.mark.parametrize("name", FILES)
def test_attribute_and_span_order_shuffled(name: str) -> None:
    rng = random.Random(name)
    requests = _requests(name)
    for request in requests:
        shuffle_order(request, rng)
    _assert_unchanged("attributes and spans shuffled", name, requests)


def _each_request(
    name: str, rewrite: Callable[[dict[str, Any]], object], nothing: str
) -> list[dict[str, Any]]:
    """The requests of fixture file ``name``, each rewritten in place by ``rewrite``; the test
    is skipped with ``nothing`` when the rewrite changed none of them."""
    requests = _requests(name)
    for request in requests:
        rewrite(request)
    if requests == _requests(name):
        pytest.skip(nothing)
    return requests


SESSION_ID_MOVES = {
    "on the resource": session_id_on_resource,
    "on every span (baggage)": session_id_on_every_span,
    "on root spans only": session_id_on_root_spans,
    "under a namespace": session_id_namespaced,
    "as a keyword argument": session_id_as_keyword,
    "as metadata the user attached": session_id_as_metadata,
}
SESSION_ID_CASES = [(move, name) for name in FILES for move in sorted(SESSION_ID_MOVES)]


@pytest.mark.parametrize(("move", "name"), SESSION_ID_CASES)
def test_session_id_moved(move: str, name: str) -> None:
    requests = _requests(name)
    SESSION_ID_MOVES[move](requests)
    _assert_unchanged(f"session id {move}", name, requests)


@pytest.mark.parametrize("name", FILES)
def test_message_content_moved_to_span_events(name: str) -> None:
    requests = _each_request(
        name, content_to_events, f"{name} records no message content in span attributes"
    )
    _assert_unchanged("message content moved to span events", name, requests)


@pytest.mark.parametrize("name", FILES)
def test_answers_split_into_parts(name: str) -> None:
    requests = _each_request(name, split_answers, f"{name} records no answer as message parts")
    _assert_unchanged("answers split into multi-part messages", name, requests)


@pytest.mark.parametrize("name", FILES)
def test_content_moved_to_log_records(name: str) -> None:
    # As an instrumentation in event mode records it: message attributes and message events
    # become log records naming their span, written in the same file as the traces.
    requests = _requests(name)
    logs = [found for r in requests if (found := content_to_log_records(r)) is not None]
    if not logs:
        pytest.skip(f"{name} records no GenAI message content")
    _assert_unchanged("content in OTLP log records", name, [*requests, *logs])


@pytest.mark.parametrize("name", FILES)
def test_content_moved_to_a_frameworks_own_log_events(name: str) -> None:
    # As a framework that logs content under its own event names: only the body's shape (a
    # message's role, a choice, message lists) says what each record holds.
    requests = _requests(name)
    logs = [
        found
        for r in requests
        if (found := content_to_log_records(r, framework="acme")) is not None
    ]
    if not logs:
        pytest.skip(f"{name} records no GenAI message content")
    _assert_unchanged("content in a framework's own log events", name, [*requests, *logs])


@pytest.mark.parametrize("name", FILES)
def test_content_as_chat_completion_events(name: str) -> None:
    # As the OpenAI instrumentations record a model call in the older per-message events: the
    # chat completions shape, tool requests as `tool_calls` of the assistant message and choice.
    requests = _each_request(
        name, content_to_chat_events, f"{name} records no model call's messages in GenAI form"
    )
    _assert_unchanged("content as chat completion events", name, requests)


@pytest.mark.parametrize("name", FILES)
def test_content_as_chat_completion_log_records(name: str) -> None:
    # The same events as the OpenAI instrumentations emit them through the Logs API.
    requests = _each_request(
        name, content_to_chat_events, f"{name} records no model call's messages in GenAI form"
    )
    logs = [found for r in requests if (found := content_to_log_records(r)) is not None]
    _assert_unchanged("content as chat completion log records", name, [*requests, *logs])


@pytest.mark.parametrize("name", FILES)
def test_tool_descriptions_only_in_the_models_definitions(name: str) -> None:
    requests = _each_request(
        name,
        descriptions_only_in_definitions,
        f"{name} records no tool description the model's definitions also hold",
    )
    _assert_unchanged("tool descriptions only in the model's definitions", name, requests)


@pytest.mark.parametrize("name", FILES)
def test_tool_content_only_in_the_models_messages(name: str) -> None:
    # As AutoGen records a tool call: the span names the tool and its call id; the arguments
    # are in the model output that asked for that id, the result in the message sent back.
    requests = _requests(name)
    tool_content_only_in_messages(requests)
    if requests == _requests(name):
        pytest.skip(f"{name} records no tool content its model messages also hold")
    _assert_unchanged("tool content only in the model's messages", name, requests)


@pytest.mark.parametrize("name", FILES)
def test_tool_calls_only_in_the_input_history(name: str) -> None:
    # As an instrumentation records a model call that keeps only the text of the output and
    # the chat completions request as sent: the calls the model asked for are seen only in
    # the next input's history, each result in a `tool` message under its call id.
    requests = _requests(name)
    tool_calls_only_in_input_history(requests)
    if requests == _requests(name):
        pytest.skip(f"{name} records no tool call in a model call's input history")
    _assert_unchanged("tool calls only in the input history", name, requests)


@pytest.mark.parametrize("name", FILES)
def test_tool_descriptions_only_on_the_tool_spans(name: str) -> None:
    # A loader's catalogue in its description is offered wherever the description is recorded.
    requests = _each_request(
        name,
        descriptions_only_on_tool_spans,
        f"{name} records no description of a called tool in the model's definitions",
    )
    _assert_unchanged("tool descriptions only on the tool spans", name, requests)
    _assert_same_catalogues(name, requests)


@pytest.mark.parametrize(("framework", "name"), [(f, n) for n in FILES for f in (None, "acme")])
def test_content_as_json_text_log_bodies(framework: str | None, name: str) -> None:
    # As Python logging through the SDK's LoggingHandler records GenAI events: each message,
    # under its GenAI event name or a framework's own, as the JSON text of its fields.
    requests = _each_request(
        name, content_to_chat_events, f"{name} records no model call's messages in GenAI form"
    )
    logs = [
        found
        for r in requests
        if (found := content_to_log_records(r, framework=framework, json_text=True)) is not None
    ]
    _assert_unchanged("content as JSON text log bodies", name, [*requests, *logs])
    _assert_same_answers(name, [*requests, *logs])


@pytest.mark.parametrize("name", FILES)
def test_choices_holding_the_models_content(name: str) -> None:
    # As ADK Go logs a model call's output: a `gen_ai.choice` record whose `content` is the
    # model's google-genai Content (`role`, `parts` of text and function calls), no `message`.
    requests = _each_request(
        name, content_to_chat_events, f"{name} records no model call's messages in GenAI form"
    )
    logs = [found for r in requests if (found := content_to_log_records(r)) is not None]
    for found in logs:
        choices_as_contents(found)
    _assert_unchanged("choices holding the model's content", name, [*requests, *logs])
    _assert_same_answers(name, [*requests, *logs])


@pytest.mark.parametrize("name", FILES)
def test_finish_reasons_as_enum_names(name: str) -> None:
    requests = _each_request(name, finish_reasons_as_enum_names, f"{name} records no finish reason")
    _assert_unchanged("finish reasons as enum names", name, requests)
    _assert_same_answers(name, requests)


@pytest.mark.parametrize("name", FILES)
def test_outputs_as_chat_completion_choices(name: str) -> None:
    # As an instrumentation records the response as it came: the model's output messages are
    # the chat completion's `choices`, each message under `message` with its finish reason.
    requests = _each_request(
        name, outputs_as_chat_choices, f"{name} records no model output in GenAI form"
    )
    _assert_unchanged("outputs as chat completion choices", name, requests)
    _assert_same_answers(name, requests)


def _assert_same_catalogues(name: str, requests: list[dict[str, Any]]) -> None:
    before, _ = _original(name)
    after = _report(FIXTURES / name, [json.dumps(r) for r in requests])
    got = {s["session_id"]: s["catalogue"] for s in after["sessions"]}
    for session in before["sessions"]:
        assert got[session["session_id"]] == session["catalogue"], session["session_id"]


def _assert_same_answers(name: str, requests: list[dict[str, Any]]) -> None:
    before, _ = _original(name)
    after = _report(FIXTURES / name, [json.dumps(r) for r in requests])
    got = {s["session_id"]: s["final_answer"] for s in after["sessions"]}
    for session in before["sessions"]:
        assert got[session["session_id"]] == session["final_answer"], session["session_id"]


ROLE_LAYOUTS = {
    "in keys with a stem, JSON-encoded": roles_in_stem_keys,
    "as compound words": roles_as_compound_words,
    "with the turn's input by name": turn_inputs_by_name,
}


@pytest.mark.parametrize(("layout", "name"), [(k, n) for n in FILES for k in sorted(ROLE_LAYOUTS)])
def test_span_roles_in_another_tracers_layout(layout: str, name: str) -> None:
    # As tracers that JSON-encode every attribute write a span's own role, its input and
    # output (`<prefix>.spanType` "\"TOOL\"", `<prefix>.spanInputs`), name its kind with a
    # compound (`CHAT_MODEL`), and record a function's arguments by parameter name.
    requests = _each_request(name, ROLE_LAYOUTS[layout], f"{name} has no span saying its role")
    _assert_unchanged(f"span roles {layout}", name, requests)
    _assert_same_answers(name, requests)
