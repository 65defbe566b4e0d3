"""Metrics (ARCHITECTURE.md section 8) from a real processor run, read with `InMemoryMetricReader`.

Expected values are worked out from the scripted agent's scenarios (spanjudge/demo/agent.py):
csv-report: 1 skill load + read_csv + calculate, 4 model calls (150/190/230/270 input tokens,
20/26/32/38 output); incident: search_logs, 2 model calls (150+190, 20+26); weather: get_weather,
2 model calls (150+190, 20+26).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider

from spanjudge import CollectingSink
from spanjudge.config import Config
from spanjudge.demo.agent import SCENARIOS, ScriptedAgent
from spanjudge.emit.metrics import score_views
from spanjudge.processor import SpanJudgeProcessor
from spanjudge.values import SessionResult

AGENT = {"gen_ai.agent.name": "ops-assistant"}


def _collect(config: Config | None = None, scenarios: Any = SCENARIOS) -> dict[str, list[Any]]:
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader], views=score_views())
    tracer_provider = TracerProvider()
    processor = SpanJudgeProcessor(
        config, tracer_provider=tracer_provider, meter_provider=meter_provider
    )
    tracer_provider.add_span_processor(processor)
    agent = ScriptedAgent(tracer_provider)
    for scenario in scenarios:
        agent.run(scenario, end_session=True)
    assert processor.force_flush(10_000)
    data = reader.get_metrics_data()
    assert data is not None
    out: dict[str, list[Any]] = {}
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            assert sm.scope.name == "spanjudge"
            for metric in sm.metrics:
                out[metric.name] = list(metric.data.data_points)
    processor.shutdown()
    return out


def _by_attrs(points: list[Any]) -> dict[frozenset[tuple[str, Any]], Any]:
    return {frozenset(dict(p.attributes).items()): p for p in points}


def test_verdict_and_session_metrics() -> None:
    m = _collect()
    verdicts = _by_attrs(m["spanjudge.verdicts"])
    key = frozenset(
        {
            "gen_ai.evaluation.name": "skill_loaded",
            "spanjudge.outcome": "pass",
            "gen_ai.skill.name": "csv-report",
            **AGENT,
        }.items()
    )
    assert verdicts[key].value == 1
    key = frozenset(
        {
            "gen_ai.evaluation.name": "skill_loaded",
            "spanjudge.outcome": "fail",
            "gen_ai.skill.name": "incident-triage",
            **AGENT,
        }.items()
    )
    assert verdicts[key].value == 1
    key = frozenset(
        {
            "gen_ai.evaluation.name": "skill_loaded",
            "spanjudge.outcome": "not_evaluated",
            "spanjudge.reason": "no_expectation",  # why it was not judged, as a label
            **AGENT,
        }.items()
    )
    assert verdicts[key].value == 1
    # Histogram of scores: buckets from the View; skill_loaded scored 1.0 and 0.0, the
    # not_evaluated verdict is not recorded as a score at all.
    score = _by_attrs(m["spanjudge.score"])[
        frozenset({"gen_ai.evaluation.name": "skill_loaded", **AGENT}.items())
    ]
    assert tuple(score.explicit_bounds) == (0.0, 0.25, 0.5, 0.75, 1.0)
    assert score.count == 2 and score.sum == 1.0
    assert list(score.bucket_counts) == [1, 0, 0, 0, 1, 0]

    sessions = _by_attrs(m["spanjudge.sessions"])
    assert sessions[frozenset({"spanjudge.session.state": "evaluated"}.items())].value == 3
    expected = _by_attrs(m["spanjudge.skill.expected"])
    assert {tuple(sorted(k)): p.value for k, p in expected.items()} == {
        (("gen_ai.agent.name", "ops-assistant"), ("gen_ai.skill.name", "csv-report")): 1,
        (("gen_ai.agent.name", "ops-assistant"), ("gen_ai.skill.name", "incident-triage")): 1,
    }
    observed = _by_attrs(m["spanjudge.skill.observed"])
    assert {tuple(sorted(k)): p.value for k, p in observed.items()} == {
        (("gen_ai.agent.name", "ops-assistant"), ("gen_ai.skill.name", "csv-report")): 1,
    }
    (tool_calls,) = m["spanjudge.session.tool_calls"]
    assert dict(tool_calls.attributes) == AGENT
    assert (tool_calls.count, tool_calls.sum) == (3, 4)
    tokens = {dict(p.attributes)["gen_ai.token.type"]: p for p in m["spanjudge.session.tokens"]}
    assert (tokens["input"].count, tokens["input"].sum) == (3, 840 + 340 + 340)
    assert (tokens["output"].count, tokens["output"].sum) == (3, 116 + 46 + 46)
    (duration,) = m["spanjudge.session.duration"]
    assert duration.count == 3 and dict(duration.attributes) == AGENT
    for name in ("spanjudge.session.retries", "spanjudge.session.backtracks"):
        (point,) = m[name]
        assert dict(point.attributes) == AGENT and point.value == 0


def test_self_telemetry() -> None:
    m = _collect()
    (received,) = m["spanjudge.spans.received"]
    assert received.value == 8 + 4 + 4  # agent spans only; the evaluation spans are skipped
    (open_sessions,) = m["spanjudge.sessions.open"]
    assert open_sessions.value == 0
    (duration,) = m["spanjudge.evaluation.duration"]
    assert duration.count == 3
    assert "spanjudge.spans.dropped" not in m  # nothing was dropped


def test_skill_labels_are_bounded() -> None:
    # A skill read from a SKILL.md path that is neither in the catalogue nor expected.
    private = replace(
        SCENARIOS[2],
        session_id="demo-private",
        calls=(("read_file", {"path": "/home/u/skills/zz-private-7f3a/SKILL.md"}),),
    )
    m = _collect(scenarios=[private])
    observed = _by_attrs(m["spanjudge.skill.observed"])
    assert [dict(k)["gen_ai.skill.name"] for k in observed] == ["other"]
    labels = {dict(p.attributes).get("gen_ai.skill.name") for p in m["spanjudge.verdicts"]}
    assert "zz-private-7f3a" not in labels
    # ...unless the configuration allows it (`labels.skills`).
    m = _collect(Config(label_skills=("zz-private-7f3a",)), scenarios=[private])
    observed = _by_attrs(m["spanjudge.skill.observed"])
    assert [dict(k)["gen_ai.skill.name"] for k in observed] == ["zz-private-7f3a"]


def _verdict_points(reader: InMemoryMetricReader) -> dict[Any, Any]:
    data = reader.get_metrics_data()
    return {
        frozenset(dict(p.attributes).items()): p.value
        for rm in (data.resource_metrics if data else ())
        for sm in rm.scope_metrics
        for metric in sm.metrics
        if metric.name == "spanjudge.verdicts"
        for p in metric.data.data_points
    }


def _scripted_results() -> list[SessionResult]:
    """The results of the scripted agent's scenarios, each session ended, through the processor."""
    keep = CollectingSink()
    tracer_provider = TracerProvider()
    processor = SpanJudgeProcessor(tracer_provider=tracer_provider, sinks=[keep])
    tracer_provider.add_span_processor(processor)
    agent = ScriptedAgent(tracer_provider)
    for scenario in SCENARIOS:
        agent.run(scenario, end_session=True)
    assert processor.force_flush(10_000)
    processor.shutdown()
    return keep.results


def test_batched_counters_match_unbatched_once_flushed() -> None:
    from spanjudge.emit.metrics import MetricsSink

    results = _scripted_results()
    readers = {batch: InMemoryMetricReader() for batch in (False, True)}
    sinks = {
        batch: MetricsSink(MeterProvider(metric_readers=[reader]), batch_counters=batch)
        for batch, reader in readers.items()
    }
    for _ in range(3):  # the same series again and again: batching sums them
        for result in results:
            for sink in sinks.values():
                sink.emit(result)
    plain = _verdict_points(readers[False])
    assert sum(plain.values()) == 3 * sum(len(r.verdicts) for r in results)
    assert _verdict_points(readers[True]) == {}  # held until the owner flushes
    assert sinks[True].flush(1.0)
    assert _verdict_points(readers[True]) == plain


def test_the_sessions_each_evaluator_saw_and_left_out_are_counted_once_per_session() -> None:
    """`tool_parameters` gives one verdict per tool call: a share of its verdicts would weigh
    a session by its calls. `spanjudge.evaluator.sessions` counts sessions."""
    from opentelemetry.sdk.metrics import MeterProvider as Provider

    from spanjudge.config import parse_config
    from spanjudge.emit.metrics import MetricsSink
    from spanjudge.engine import Engine
    from spanjudge.offline import run_offline
    from tests.conftest import FIXTURES

    reader = InMemoryMetricReader()
    sink = CollectingSink()
    inputs = sorted(str(p) for p in (FIXTURES / "strands").glob("*.jsonl"))
    engine = Engine(parse_config({"evaluators": {"tool_parameters": {"sample": 0.3}}}))
    metrics = MetricsSink(Provider(metric_readers=[reader]))
    run_offline(inputs, engine, sink)
    for result in sink.by_session().values():
        metrics.emit(result)
    data = reader.get_metrics_data()
    assert data is not None
    counted: dict[str | None, int] = {}
    verdicts = 0
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                for point in metric.data.data_points:
                    attrs = dict(point.attributes)
                    if attrs.get("gen_ai.evaluation.name") != "tool_parameters":
                        continue
                    if metric.name == "spanjudge.evaluator.sessions":
                        reason = attrs.get("spanjudge.reason")
                        counted[reason] = counted.get(reason, 0) + point.value
                    elif metric.name == "spanjudge.verdicts":
                        verdicts += point.value
    results = sink.by_session().values()
    left_out = sum(
        1
        for r in results
        if any(v.evaluator == "tool_parameters" and v.reason == "not_sampled" for v in r.verdicts)
    )
    assert 0 < left_out < len(results)
    assert counted == {None: len(results) - left_out, "not_sampled": left_out}
    assert verdicts > len(results)  # several verdicts for a judged session


def _points(reader: InMemoryMetricReader) -> dict[Any, Any]:
    """Every data point of every metric: counter values, histogram counts, sums and buckets."""
    data = reader.get_metrics_data()
    out: dict[Any, Any] = {}
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                for p in metric.data.data_points:
                    key = (metric.name, frozenset(dict(p.attributes).items()))
                    if hasattr(p, "bucket_counts"):
                        out[key] = (p.count, p.sum, tuple(p.bucket_counts), p.min, p.max)
                    else:
                        out[key] = p.value
    return out


def test_tallies_replayed_record_what_emitting_each_session_records() -> None:
    # Sessions evaluated in another process come as tallies of several sessions at a time:
    # the label caps admit the same names, count the same cut names, and every series ends
    # with the same values as when each session is emitted on its own.
    from spanjudge.emit.metrics import MetricsSink, MetricsTally

    results = _scripted_results()
    names = ["alpha", "x" * 200, "beta", "Alpha", "gamma", "y" * 300]  # over a cap of 3
    renamed = [
        replace(r, trajectory=replace(r.trajectory, agent_name=name))
        for name in names
        for r in results
    ]
    one, replayed = InMemoryMetricReader(), InMemoryMetricReader()
    emitting = MetricsSink(MeterProvider(metric_readers=[one]), max_label_values=3)
    replaying = MetricsSink(
        MeterProvider(metric_readers=[replayed]), max_label_values=3, batch_counters=True
    )
    for result in renamed:
        emitting.emit(result)
    for start in range(0, len(renamed), 4):
        tally = MetricsTally()
        for result in renamed[start : start + 4]:
            tally.add(result)
        replaying.replay(tally)
    assert replaying.flush(1.0)
    expected = _points(one)
    agents = {dict(k[1]).get("gen_ai.agent.name") for k in expected} - {None}
    assert "other" in agents and "gamma" not in agents and "Alpha" not in agents
    cut = sum(v for k, v in expected.items() if k[0] == "spanjudge.label_values_cut")
    assert cut == 2 * len(results)  # each long name, once per session
    assert _points(replayed) == expected


def test_measures_named_alike_but_written_differently_are_separate_series() -> None:
    # A plugin's measures keyed 1, True and 1.0 are equal as dict keys, but their series are
    # named by their text: three series, each with its own value.
    from spanjudge.emit.metrics import MetricsTally
    from spanjudge.values import Verdict

    result = _scripted_results()[0]
    tally = MetricsTally()
    for key, value in ((1, 5), (True, 6), (1.0, 7)):
        verdict = Verdict(
            evaluator="plugin_measures",
            outcome="pass",
            score=1.0,
            label="pass",
            explanation="measured",
            details={"measured": {key: value}},
        )
        tally.add(replace(result, verdicts=[verdict]))
    measures = {
        series[2]: values
        for series, values in tally.values.items()
        if series[0] == "spanjudge.trajectory.measure" and series[1] == "plugin_measures"
    }
    assert measures == {"1": [5], "True": [6], "1.0": [7]}
