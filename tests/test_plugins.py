"""Third-party extensions through entry points (ARCHITECTURE.md section 13): one fake installed
distribution per test proves each group (evaluators, recognisers, judges, sinks) end to end, and
that a broken plugin or one named like a built-in is a configuration error naming it."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.trace import Tracer

from spanjudge import CollectingSink, semconv
from spanjudge.config import parse_config
from spanjudge.engine import Engine
from spanjudge.errors import ConfigError
from spanjudge.offline import run_offline
from tests.conftest import fake_distribution, recorded, write_jsonl

PLUGIN_SOURCE = textwrap.dedent(
    """
    from spanjudge.judges.base import Judgement
    from spanjudge.trajectory.steps import Step
    from spanjudge.values import Verdict

    RECEIVED = []

    class Counting:
        name = "tool_count"

        @classmethod
        def from_options(cls, options, path, problems):
            if "at_most" not in options:
                problems.append(f"{path}.at_most: required")
            return cls()

        def evaluate(self, ctx):
            n = ctx.trajectory.stats.tool_calls
            return [Verdict(evaluator=self.name, outcome="pass", score=1.0, label=str(n),
                            explanation=f"{n} tool calls")]

    class HandRolled:
        name = "hand_rolled"

        def recognise(self, span):
            if span.name != "my.tool":
                return None
            return [Step(kind="tool_call", name=str(span.attributes["my.tool.name"]),
                         span_id=span.span_id, trace_id=span.trace_id,
                         start_unix_nano=span.start_unix_nano,
                         end_unix_nano=span.end_unix_nano)]

    class Oracle:
        name = "oracle"

        def judge(self, request):
            return Judgement(rating="yes", score=1.0, rationale="the oracle agrees")

    def oracle(settings, path, problems):
        if settings.get("mood") != "agreeable":
            problems.append(f"{path}.mood: expected 'agreeable'")
        return Oracle()

    class Keeper:
        def __init__(self, label):
            self.label = label

        def emit(self, result):
            RECEIVED.append((self.label, result.trajectory.session_id))

        def flush(self, timeout_s):
            return True

        def shutdown(self):
            pass

    def keeper(options, path, problems):
        return Keeper(options.get("label", "?"))
    """
)


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Any:
    """A distribution whose module (named after the test, so none is cached) registers one
    factory in every group."""
    module = f"sjplugin_{abs(hash(request.node.name))}"
    site = fake_distribution(
        tmp_path / "site",
        "sjplugin",
        {
            "spanjudge.evaluators": {"tool_count": f"{module}:Counting.from_options"},
            "spanjudge.recognisers": {"hand_rolled": f"{module}:HandRolled"},
            "spanjudge.judges": {"oracle": f"{module}:oracle"},
            "spanjudge.sinks": {"keeper": f"{module}:keeper"},
        },
        {module: PLUGIN_SOURCE},
    )
    monkeypatch.syspath_prepend(str(site))
    return __import__(module)


def _session_file(tmp_path: Path) -> Path:
    def body(tracer: Tracer) -> None:
        attrs = {
            semconv.GEN_AI_OPERATION_NAME: semconv.OP_INVOKE_AGENT,
            semconv.SESSION_ID: "plug-1",
        }
        with tracer.start_as_current_span("invoke_agent a", attributes=attrs):
            for tool in ("grep", "sed"):
                with tracer.start_as_current_span(
                    "my.tool", attributes={"my.tool.name": tool, semconv.SESSION_ID: "plug-1"}
                ):
                    pass

    return write_jsonl(tmp_path / "plug.jsonl", recorded(body))


def test_every_group_works_end_to_end(plugin: Any, tmp_path: Path) -> None:
    config = parse_config(
        {
            "evaluators": {"tool_count": {"at_most": 5}, "skill_selection": {"judge": "mine"}},
            "judges": {"mine": {"type": "oracle", "mood": "agreeable"}},
            "emit": {"sinks": {"keeper": {"label": "kept"}}},
        }
    )
    writer = CollectingSink()
    run_offline([str(_session_file(tmp_path))], Engine(config), writer)
    [result] = writer.results
    # recogniser: the hand-rolled tool spans are tool calls, which the evaluator counts
    assert [s.name for s in result.trajectory.steps if s.kind == "tool_call"] == ["grep", "sed"]
    [counted] = [v for v in result.verdicts if v.evaluator == "tool_count"]
    assert counted.explanation == "2 tool calls"
    # sink: the plugin sink saw the session through the same pipeline as the report
    assert plugin.RECEIVED == [("kept", "plug-1")]


def test_a_plugin_judge_type_is_configured_like_a_built_in(plugin: Any) -> None:
    from spanjudge.judges.registry import judge_lookup

    config = parse_config(
        {
            "judges": {"mine": {"type": "oracle", "mood": "agreeable"}},
            "evaluators": {"skill_selection": {"judge": "mine"}, "tool_count": {"at_most": 1}},
        }
    )
    judge = judge_lookup(config)("skill_selection")
    assert judge is not None and judge.name == "oracle"
    with pytest.raises(ConfigError) as info:
        parse_config(
            {
                "judges": {"mine": {"type": "oracle", "mood": "grumpy"}},
                "evaluators": {"tool_count": {"enabled": False}},
            }
        )
    assert info.value.problems == ["judges.mine.mood: expected 'agreeable'"]


def test_plugin_options_are_validated_with_the_configuration(plugin: Any) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"evaluators": {"tool_count": {}}, "emit": {"sinks": {"kepeer": {}}}})
    assert "evaluators.tool_count.at_most: required" in info.value.problems
    [sink] = [p for p in info.value.problems if p.startswith("emit.sinks.kepeer")]
    assert "did you mean 'keeper'?" in sink and "spanjudge.sinks" in sink


def _install(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    group: str,
    eps: dict[str, str],
    source: str = "",
) -> None:
    module = f"sjbroken_{tmp_path.name}"  # a fresh module per test: none is cached
    eps = {name: target.replace("sjbroken_mod", module) for name, target in eps.items()}
    site = fake_distribution(tmp_path / "site", "sjbroken", {group: eps}, {module: source})
    monkeypatch.syspath_prepend(str(site))


@pytest.mark.parametrize(
    "group",
    ["spanjudge.evaluators", "spanjudge.recognisers", "spanjudge.judges", "spanjudge.sinks"],
)
def test_a_plugin_that_cannot_load_is_a_config_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, group: str
) -> None:
    _install(tmp_path, monkeypatch, group, {"wobbly": "sjbroken_missing:thing"})
    from spanjudge.emit.plugins import SINKS
    from spanjudge.evaluators.base import EVALUATORS
    from spanjudge.judges.registry import JUDGES
    from spanjudge.recognition.registry import RECOGNISERS

    registry = {r.group: r for r in (EVALUATORS, RECOGNISERS, JUDGES, SINKS)}[group]
    with pytest.raises(ConfigError) as info:
        registry.factories()
    [problem] = info.value.problems
    assert problem.startswith(
        f"plugin 'wobbly' (sjbroken_missing:thing, from sjbroken) in "
        f"entry-point group {group}: cannot be loaded: ModuleNotFoundError"
    )


def test_load_config_reports_a_broken_evaluator_plugin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _install(tmp_path, monkeypatch, "spanjudge.evaluators", {"wobbly": "sjbroken_mod:nothing"})
    with pytest.raises(ConfigError) as info:
        parse_config({})
    assert any("plugin 'wobbly'" in p and "AttributeError" in p for p in info.value.problems)


def test_a_plugin_named_like_a_built_in_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _install(
        tmp_path,
        monkeypatch,
        "spanjudge.evaluators",
        {"cost": "sjbroken_mod:f"},
        "def f(options, path, problems):\n    raise AssertionError('never built')\n",
    )
    with pytest.raises(ConfigError) as info:
        parse_config({})
    [problem] = info.value.problems
    assert "plugin 'cost'" in problem and "a built-in evaluator has that name" in problem


def test_a_plugin_factory_that_raises_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _install(
        tmp_path,
        monkeypatch,
        "spanjudge.evaluators",
        {"explodes": "sjbroken_mod:f"},
        "def f(options, path, problems):\n    raise KeyError('oops')\n",
    )
    with pytest.raises(ConfigError) as info:
        parse_config({})
    assert info.value.problems == [
        "evaluators.explodes: the plugin's factory raised KeyError: 'oops'"
    ]
