"""Verdicts and sessions as OpenTelemetry metrics, plus spanjudge's own telemetry
(ARCHITECTURE.md section 8).

Add `score_views()` to your `MeterProvider` so that `spanjudge.score` uses the buckets
0, .25, .5, .75, 1 on every SDK version (recent SDKs also honour the advisory set here):

    MeterProvider(metric_readers=[reader], views=score_views())

Label values are bounded: a skill name outside the session's catalogue, its expectations and the
configured `labels.skills` is reported as `other`, and so is any agent or skill name past the
`labels.max_values` distinct ones (names listed in `labels.agents` / `labels.skills` always pass).
A series not updated for `labels.series_ttl` (default 1h) is dropped from the export (and its
agent or skill name frees its place under the cap), as the Collector's `metric_expiration` does.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Observation

from spanjudge import semconv
from spanjudge._version import __version__
from spanjudge.emit.labels import OTHER, LabelBudget, SkillLabels, label_budgets, session_skills
from spanjudge.emit.sdk_series import SdkSeries
from spanjudge.reasons import NOT_SELECTED
from spanjudge.values import SessionResult, skill_key

__all__ = [
    "OTHER",
    "LabelBudget",
    "MetricsSink",
    "MetricsTally",
    "SelfTelemetry",
    "SkillLabels",
    "score_views",
]

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.sdk.metrics.view import View

log = logging.getLogger("spanjudge")
UNKNOWN_AGENT = "unknown"
_TOOL_CALL_BUCKETS = (0.0, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0)
_TOKEN_BUCKETS = (0.0, 100.0, 1_000.0, 5_000.0, 10_000.0, 50_000.0, 100_000.0, 500_000.0, 1e6)
_DURATION_BUCKETS = (0.0, 1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)
_EVAL_DURATION_BUCKETS = (0.0, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0, 120.0)


def score_views() -> list[View]:
    """Views to add to a `MeterProvider`: `spanjudge.score` buckets 0, .25, .5, .75, 1."""
    # The SDK only here: `spanjudge eval` records to the API's no-op meter and has no use for it.
    from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View

    return [
        View(
            instrument_name=semconv.M_SCORE,
            aggregation=ExplicitBucketHistogramAggregation(boundaries=semconv.SCORE_BUCKETS),
        )
    ]


def _meter(meter_provider: Any) -> metrics.Meter:
    provider = meter_provider or metrics.get_meter_provider()
    meter: metrics.Meter = provider.get_meter(semconv.SJ_SCOPE_NAME, __version__)
    return meter


# Measures that already have a metric of their own (ARCHITECTURE.md section 8): not recorded twice.
_OWN_SERIES = frozenset(
    {"tool_calls", "input_tokens", "output_tokens", "duration_s", "retries", "backtracks"}
)


_AGENT = semconv.GEN_AI_AGENT_NAME
_SKILL = semconv.GEN_AI_SKILL_NAME
_EVALUATOR = semconv.GEN_AI_EVALUATION_NAME
_REASON = semconv.SJ_REASON
# A series as `MetricsTally` holds it: a flat tuple, the metric's name and then the values of
# its attributes, in this order (one tuple per verdict, not one per attribute). A skill or a
# reason of None is one the series does not have; the agent's None is the unknown agent. The
# agent's value is its raw name and a skill's is (name, the spelling its session names it in,
# or None): the label budgets bound them where the series is recorded (`MetricsSink`).
SERIES_ATTRIBUTES: dict[str, tuple[str, ...]] = {
    semconv.M_VERDICTS: (_EVALUATOR, semconv.SJ_OUTCOME, _AGENT, _SKILL, _REASON),
    semconv.M_SCORE: (_EVALUATOR, _AGENT),
    semconv.M_EVALUATOR_SESSIONS: (_EVALUATOR, _AGENT, _REASON),
    semconv.M_SKILL_EXPECTED: (_AGENT, _SKILL),
    semconv.M_SKILL_OBSERVED: (_AGENT, _SKILL),
    semconv.M_SESSION_TOOL_CALLS: (_AGENT,),
    semconv.M_SESSION_TOKENS: (_AGENT, semconv.GEN_AI_TOKEN_TYPE),
    semconv.M_SESSION_DURATION: (_AGENT,),
    semconv.SJ_TRAJECTORY_MEASURE: (_EVALUATOR, semconv.SJ_MEASURE_NAME, _AGENT),
}
_OPTIONAL = frozenset({_SKILL, _REASON})  # attributes a series may not have
_BOUNDED = frozenset({_AGENT, _SKILL})  # attributes whose values the label budgets bound


class MetricsTally:
    """What `MetricsSink` records for some evaluated sessions, added up per series: counter
    totals, histogram values, and how often each agent and skill name was used. Label values
    are raw until `MetricsSink.replay` bounds them, so a tally built where sessions are
    evaluated (an evaluation process of `serve.workers` > 1) is recorded in the serve process
    as if each session had been emitted there, one step per series."""

    __slots__ = ("_measures", "agents", "counts", "labels", "values")

    def __init__(self) -> None:
        # (attribute, raw value) -> uses, in the order of first use (the budgets admit first come)
        self.labels: dict[tuple[str, Any], int] = {}
        # series (`SERIES_ATTRIBUTES`) -> total, or the values in the order recorded
        self.counts: dict[tuple[Any, ...], float] = {}
        self.values: dict[tuple[Any, ...], list[float]] = {}
        # raw agent name -> [retries, backtracks] (`spanjudge.session.*` counters)
        self.agents: dict[str | None, list[int]] = {}
        # (evaluator, raw agent) -> measure name -> its `values` list: a session's measures
        # are a dozen or more, the same names session after session, each found by its name
        # instead of by a series built and hashed for every value
        self._measures: dict[tuple[str, str | None], dict[Any, list[float]]] = {}

    def __getstate__(self) -> tuple[Any, ...]:
        # what another process replays; the index of `values` is rebuilt as sessions are added
        return self.labels, self.counts, self.values, self.agents

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        self.labels, self.counts, self.values, self.agents = state
        self._measures = {}

    def __bool__(self) -> bool:
        return bool(self.labels or self.counts or self.values or self.agents)

    def _use(self, attribute: str, raw: Any) -> None:
        self.labels[(attribute, raw)] = self.labels.get((attribute, raw), 0) + 1

    def add(self, result: SessionResult) -> None:
        """Count one evaluated session (ARCHITECTURE.md section 8 lists what is recorded)."""
        trajectory = result.trajectory
        agent = trajectory.agent_name or None  # None: `unknown`, which no budget counts
        self._use(_AGENT, agent)
        named: dict[str, str] | None = None

        def skill(name: str) -> tuple[str, str | None]:
            nonlocal named
            if named is None:
                named = session_skills(result)
            raw = (name, named.get(skill_key(name)))
            self._use(_SKILL, raw)
            return raw

        counts, values = self.counts, self.values
        # evaluator -> why its sample or filter left the session out (None: it judged it)
        left_out: dict[str, str | None] = {}
        # (evaluator, its measures) of the verdicts that report measures, for the end
        measures: list[tuple[str, dict[Any, Any]]] = []
        for verdict in result.verdicts:
            evaluator, reason = verdict.evaluator, verdict.reason
            if reason in NOT_SELECTED:
                left_out[evaluator] = reason
            elif evaluator not in left_out:
                left_out[evaluator] = None
            skill_name = verdict.target.skill
            # a reason is bounded (reason codes): lets coverage leave out "nothing configured
            # to judge"
            series: tuple[Any, ...] = (
                semconv.M_VERDICTS,
                evaluator,
                verdict.outcome,
                agent,
                skill(skill_name) if skill_name else None,
                reason or None,
            )
            counts[series] = counts.get(series, 0) + 1
            if verdict.score is not None:
                values.setdefault((semconv.M_SCORE, evaluator, agent), []).append(verdict.score)
            details = verdict.details
            if details:
                measured = details.get("measured")
                if isinstance(measured, dict):
                    measures.append((evaluator, measured))
        for evaluator, why in left_out.items():
            series = (semconv.M_EVALUATOR_SESSIONS, evaluator, agent, why)
            counts[series] = counts.get(series, 0) + 1
        if result.expectation.skills:
            for name in dict.fromkeys(skill_key(s) for s in result.expectation.skills):
                series = (semconv.M_SKILL_EXPECTED, agent, skill(name))
                counts[series] = counts.get(series, 0) + 1
        if trajectory.skill_loads:
            loaded = dict.fromkeys(
                skill_key(load.skill) for load in trajectory.skill_loads if load.status == "loaded"
            )
            for name in loaded:
                series = (semconv.M_SKILL_OBSERVED, agent, skill(name))
                counts[series] = counts.get(series, 0) + 1
        stats = trajectory.stats
        values.setdefault((semconv.M_SESSION_TOOL_CALLS, agent), []).append(stats.tool_calls)
        for token_type, count in (("input", stats.input_tokens), ("output", stats.output_tokens)):
            if count is not None:
                values.setdefault((semconv.M_SESSION_TOKENS, agent, token_type), []).append(count)
        values.setdefault((semconv.M_SESSION_DURATION, agent), []).append(stats.duration_s)
        sums = self.agents.get(agent)
        if sums is None:
            self.agents[agent] = [stats.retries, stats.backtracks]
        else:
            sums[0] += stats.retries
            sums[1] += stats.backtracks
        # The trajectory vector online: every numeric measure an evaluator reports, whatever
        # its outcome, so Grafana can show each component's distribution.
        for evaluator, measured in measures:
            by_name = self._measures.get((evaluator, agent))
            if by_name is None:
                by_name = self._measures[(evaluator, agent)] = {}
            for name, value in measured.items():
                # ints and floats (a bool is an int, and no measure)
                if not isinstance(value, (int, float)) or isinstance(value, bool):
                    continue
                if name in _OWN_SERIES:
                    continue
                # by the name as its series is named: 1, True and 1.0 are equal keys, three series
                label = name if type(name) is str else str(name)
                recorded = by_name.get(label)
                if recorded is None:
                    series = (semconv.SJ_TRAJECTORY_MEASURE, evaluator, label, agent)
                    recorded = by_name[label] = values.setdefault(series, [])
                recorded.append(value)


class MetricsSink:
    """Counts verdicts and records per-session trajectory statistics (ARCHITECTURE.md section 8).

    `spanjudge.sessions` is counted by `SelfTelemetry.session_closed`, once per closed session,
    including sessions whose evaluation failed. Sessions evaluated elsewhere come as a
    `MetricsTally` (`replay`), recorded exactly as `emit` of each of them would.
    """

    def __init__(
        self,
        meter_provider: Any = None,
        label_skills: Sequence[str] = (),
        *,
        label_agents: Sequence[str] = (),
        max_label_values: int = 100,
        batch_counters: bool = False,
        series_ttl_s: float | None = 3600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        meter = _meter(meter_provider)
        # With ``batch_counters`` sessions are tallied, counter increments summed and histogram
        # values collected per series, and handed to the SDK on `flush` (one step per series
        # and flush instead of ~24 SDK calls per session): only for an owner that flushes after
        # every batch it emits, as the sidecar's worker does.
        self._batched: dict[tuple[Any, tuple[tuple[str, str], ...]], float] | None = (
            {} if batch_counters else None
        )
        self._values: dict[tuple[Any, tuple[tuple[str, str], ...]], list[float]] = {}
        self._pending = MetricsTally()
        # Series -> when last updated (for `series_ttl_s` and `spanjudge.label_series`). The
        # lock covers emit, flush and expiry: metric readers expire series from their own
        # thread, and a name must not be released while a series of it waits for the flush.
        self._updated: dict[tuple[Any, tuple[tuple[str, str], ...]], float] = {}
        self._lock = threading.Lock()
        self._unexpirable_warned = False
        self._ttl = series_ttl_s if series_ttl_s else None
        self._clock = clock
        self._sdk = SdkSeries()
        self._seen_agents: set[str] = set()
        # long names are cut, and counted as `spanjudge.label_values_cut`
        self._labels, self._agents = label_budgets(
            meter, label_skills, label_agents, max_label_values
        )
        self.verdicts = meter.create_counter(
            semconv.M_VERDICTS, unit="1", description="Verdicts by evaluator and outcome"
        )
        self.evaluator_sessions = meter.create_counter(
            semconv.M_EVALUATOR_SESSIONS,
            unit="1",
            description="Sessions each evaluator saw (spanjudge.reason: the ones its sample or "
            "filter left out)",
        )
        self.score = meter.create_histogram(
            semconv.M_SCORE,
            unit="1",
            description="Verdict scores (not_evaluated verdicts have none and are not recorded)",
            explicit_bucket_boundaries_advisory=list(semconv.SCORE_BUCKETS),
        )
        self.skill_expected = meter.create_counter(
            semconv.M_SKILL_EXPECTED, unit="1", description="Skills a session was required to load"
        )
        self.skill_observed = meter.create_counter(
            semconv.M_SKILL_OBSERVED, unit="1", description="Skills a session loaded successfully"
        )
        self.tool_calls = meter.create_histogram(
            semconv.M_SESSION_TOOL_CALLS,
            unit="1",
            description="Tool calls per session (skill loads excluded)",
            explicit_bucket_boundaries_advisory=list(_TOOL_CALL_BUCKETS),
        )
        self.tokens = meter.create_histogram(
            semconv.M_SESSION_TOKENS,
            unit="1",
            description="Model tokens per session by gen_ai.token.type",
            explicit_bucket_boundaries_advisory=list(_TOKEN_BUCKETS),
        )
        self.measure = meter.create_histogram(
            semconv.SJ_TRAJECTORY_MEASURE,
            unit="1",
            description="Trajectory measures per session (details.measured of each verdict)",
        )
        self.duration = meter.create_histogram(
            semconv.M_SESSION_DURATION,
            unit="s",
            description="Session duration, first span start to last span end",
            explicit_bucket_boundaries_advisory=list(_DURATION_BUCKETS),
        )
        self.retries = meter.create_counter(
            semconv.M_SESSION_RETRIES, unit="1", description="Retried tool calls and skill loads"
        )
        self.backtracks = meter.create_counter(
            semconv.M_SESSION_BACKTRACKS, unit="1", description="Calls that undid earlier effects"
        )
        self._instruments: dict[str, Any] = {
            semconv.M_VERDICTS: self.verdicts,
            semconv.M_EVALUATOR_SESSIONS: self.evaluator_sessions,
            semconv.M_SCORE: self.score,
            semconv.M_SKILL_EXPECTED: self.skill_expected,
            semconv.M_SKILL_OBSERVED: self.skill_observed,
            semconv.M_SESSION_TOOL_CALLS: self.tool_calls,
            semconv.M_SESSION_TOKENS: self.tokens,
            semconv.SJ_TRAJECTORY_MEASURE: self.measure,
            semconv.M_SESSION_DURATION: self.duration,
        }
        meter.create_observable_gauge(
            semconv.M_LABEL_SERIES,
            callbacks=[self._observe_series],
            unit="{series}",
            description="Series of the verdict and session metrics (stale ones expire)",
        )

    def emit(self, result: SessionResult) -> None:
        with self._lock:
            self._pending.add(result)
            if self._batched is None:
                self._record_tally(self._pending)
                self._pending = MetricsTally()

    def replay(self, tally: MetricsTally) -> None:
        """Record the sessions ``tally`` counted, as `emit` of each would have."""
        with self._lock:
            self._record_tally(tally)

    def _record_tally(self, tally: MetricsTally) -> None:
        """Bound the tally's label values (each name once, in the order first used) and add
        its series to the batch (or to the SDK when not batching)."""
        labels: dict[tuple[str, Any], str] = {}
        for (attribute, raw), calls in tally.labels.items():
            if attribute == _AGENT:
                labels[(attribute, raw)] = self._agents(raw, None, calls) if raw else UNKNOWN_AGENT
            else:
                labels[(attribute, raw)] = self._labels(raw[0], raw[1], calls)

        def bounded(series: tuple[Any, ...]) -> tuple[Any, tuple[tuple[str, Any], ...]]:
            # the series' (attribute, value) pairs, but for a skill or a reason it does not
            # have, agents and skills bounded
            name = series[0]
            return instruments[name], tuple(
                (attribute, labels[(attribute, value)] if attribute in _BOUNDED else value)
                for attribute, value in zip(SERIES_ATTRIBUTES[name], series[1:], strict=True)
                if value is not None or attribute not in _OPTIONAL
            )

        instruments = self._instruments
        for series, total in tally.counts.items():
            instrument, items = bounded(series)
            self._add(instrument, total, items)
        for series, values in tally.values.items():
            instrument, items = bounded(series)
            self._record(instrument, values, items)
        for raw, (retries, backtracks) in tally.agents.items():
            agent = labels[(_AGENT, raw)]
            agent_items = ((_AGENT, agent),)
            # Zero adds only create the series (so "absent" and "zero" differ once an agent
            # was seen).
            if retries or agent not in self._seen_agents:
                self._add(self.retries, retries, agent_items)
            if backtracks or agent not in self._seen_agents:
                self._add(self.backtracks, backtracks, agent_items)
            self._seen_agents.add(agent)

    def _add(self, counter: Any, value: float, items: tuple[tuple[str, str], ...]) -> None:
        key = (counter, items)
        if self._batched is None:
            counter.add(value, dict(items))
            self._updated[key] = self._clock()
            return
        self._batched[key] = self._batched.get(key, 0) + value

    def _record(
        self, histogram: Any, values: list[float], items: tuple[tuple[str, str], ...]
    ) -> None:
        key = (histogram, items)
        if self._batched is None:
            attrs = dict(items)
            for value in values:
                histogram.record(value, attrs)
            self._updated[key] = self._clock()
            return
        recorded = self._values.get(key)
        if recorded is None:
            self._values[key] = list(values)
        else:
            recorded.extend(values)

    def flush(self, timeout_s: float) -> bool:
        # Metric readers collect on their own schedule (or on scrape); only batched counter
        # increments and histogram values wait here.
        with self._lock:
            if self._pending:
                self._record_tally(self._pending)
                self._pending = MetricsTally()
            if not self._batched and not self._values:
                return True
            batched, self._batched = self._batched or {}, {}
            values, self._values = self._values, {}
            write = self._sdk.write
            for (counter, items), total in batched.items():
                if not write(counter, items, total):
                    counter.add(total, dict(items))
            for (histogram, items), recorded in values.items():
                if not write(histogram, items, recorded):
                    attrs = dict(items)
                    for value in recorded:
                        histogram.record(value, attrs)
            now = self._clock()
            self._updated.update(dict.fromkeys(batched, now))
            self._updated.update(dict.fromkeys(values, now))
        return True

    def expire(self) -> int:
        """Drop the series not updated for the ttl from every reader; returns how many are left.

        Run on every collection (scrape or export), so an expired series is in no output."""
        with self._lock:
            if self._ttl is None:
                return len(self._updated)
            now = self._clock()
            cutoff = now - self._ttl
            stale = [key for key, at in self._updated.items() if at < cutoff]
            if not stale:
                return len(self._updated)
            for key in stale:
                if self._sdk.forget(*key):
                    del self._updated[key]
                else:  # still exported: it keeps its name's place (tried again a ttl later)
                    self._updated[key] = now
                    self._warn_unexpirable()
            agents: set[str] = set()
            skills: set[str] = set()
            # names in series still waiting for the flush stay admitted too
            pending = [*self._updated, *list(self._batched or ()), *list(self._values)]
            for _, items in pending:
                for name, value in items:
                    if name == semconv.GEN_AI_AGENT_NAME:
                        agents.add(value)
                    elif name == semconv.GEN_AI_SKILL_NAME:
                        skills.add(value)
            self._agents.release(agents)
            self._labels.budget.release(skills)
            self._seen_agents &= agents  # a returning agent gets its zero series again
            return len(self._updated)

    def _warn_unexpirable(self) -> None:
        if not self._unexpirable_warned:
            self._unexpirable_warned = True
            log.warning(
                "labels.series_ttl: stale metric series cannot be removed from this meter"
                " provider (%s); they stay exported, and so do their agent and skill names",
                "a View with attribute_keys on them"
                if self._sdk.checked
                else "opentelemetry-sdk is not a version whose internals spanjudge checked",
            )

    def _observe_series(self, options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(self.expire())]

    def shutdown(self) -> None:
        """Hands over batched counts; the meter provider itself belongs to the user."""
        self.flush(0.0)


class SelfTelemetry:
    """spanjudge's own health: spans in and dropped, open sessions, evaluation time, closes,
    verdicts the sidecar's export dropped.

    With ``batch`` the two measurements taken once per session (`evaluation_duration` and
    `session_closed`) are held and handed to the SDK one step per series, as a batching
    `MetricsSink` does with the verdict metrics: by `flush` (the pipeline's `flush` calls it),
    at the start of every collection (so every export and scrape has all of them) and once
    `MAX_HELD` durations are held."""

    MAX_HELD = 1024

    def __init__(self, meter_provider: Any = None, *, batch: bool = False) -> None:
        meter = _meter(meter_provider)
        self._open_fn: Callable[[], int] | None = None
        self._lock = threading.Lock()
        self._batch = batch
        self._sdk = SdkSeries()
        self._held_durations: list[float] = []  # held evaluation durations, in the order taken
        self._held_closed: dict[str, int] = {}  # session state -> closes held
        self._received = meter.create_counter(
            semconv.M_SPANS_RECEIVED, unit="1", description="Spans handed to spanjudge"
        )
        self._dropped = meter.create_counter(
            semconv.M_SPANS_DROPPED, unit="1", description="Spans not evaluated, by reason"
        )
        self._verdicts_dropped = meter.create_counter(
            semconv.M_VERDICTS_DROPPED,
            unit="1",
            description="Verdict spans and log records the export dropped, by signal and reason",
        )
        self._sessions = meter.create_counter(
            semconv.M_SESSIONS, unit="1", description="Closed sessions by spanjudge.session.state"
        )
        self._logs_unread = meter.create_counter(
            semconv.M_LOG_RECORDS_UNREAD,
            unit="1",
            description="Log records not read as span content, by reason",
        )
        self._eval_duration = meter.create_histogram(
            semconv.M_EVALUATION_DURATION,
            unit="s",
            description="Time to evaluate one session",
            explicit_bucket_boundaries_advisory=list(_EVAL_DURATION_BUCKETS),
        )
        self._non_agent = meter.create_counter(
            semconv.M_NON_AGENT_TRACES,
            unit="{trace}",
            description="Closed span groups without agent activity (not judged, not sessions)",
        )
        self._internal = meter.create_counter(
            semconv.M_INTERNAL_ERRORS, unit="1", description="Internal errors caught by spanjudge"
        )
        self._keys_refused = meter.create_counter(
            semconv.M_SESSION_KEYS_REFUSED,
            unit="{span}",
            description="Spans whose session key attribute held no string or integer (no key)",
        )
        meter.create_observable_gauge(
            semconv.M_SESSIONS_OPEN,
            callbacks=[self._observe_open],
            # not "1": remote write would add a `_ratio` suffix to a unit-1 gauge
            unit="{session}",
            description="Sessions currently open",
        )

    def _observe_open(self, options: CallbackOptions) -> Iterable[Observation]:
        # A collection is under way: what is held goes in with it.
        self.flush()
        fn = self._open_fn
        return [Observation(fn())] if fn is not None else []

    def flush(self) -> None:
        """Hand the held measurements to the SDK (nothing to do unless batching)."""
        with self._lock:  # held while writing: batches reach the SDK in the order taken
            durations, self._held_durations = self._held_durations, []
            closed, self._held_closed = self._held_closed, {}
            # Closes first, as a session is closed before its evaluation is timed: the SDK
            # lists metrics in the order they were first written.
            for state, n in closed.items():
                attrs = {semconv.SJ_SESSION_STATE: state}
                if not self._sdk.write(self._sessions, tuple(attrs.items()), n):
                    self._sessions.add(n, attrs)
            if durations and not self._sdk.write(self._eval_duration, (), durations):
                for seconds in durations:
                    self._eval_duration.record(seconds)

    def set_open_sessions_callback(self, fn: Callable[[], int]) -> None:
        self._open_fn = fn

    def spans_received(self, n: int) -> None:
        if n:
            self._received.add(n)

    def spans_dropped(self, n: int, reason: str) -> None:
        if n:
            self._dropped.add(n, {semconv.DROP_REASON: reason})

    def verdicts_dropped(self, n: int, signal: str, reason: str) -> None:
        """Items of ``signal`` (traces: evaluation spans; logs: verdict log records) the verdict
        export dropped. Zero creates the series: a verdict export starts it, so that the first
        drop is an increase (Prometheus' `increase()` does not count a series' first sample)."""
        self._verdicts_dropped.add(n, {semconv.EXPORT_SIGNAL: signal, semconv.DROP_REASON: reason})

    def log_records_unread(self, n: int, reason: str) -> None:
        """Log records not read as content of a span (`spans.logs`), by reason."""
        if n:
            self._logs_unread.add(n, {semconv.DROP_REASON: reason})

    def evaluation_duration(self, seconds: float) -> None:
        if not self._batch:
            self._eval_duration.record(max(0.0, seconds))
            return
        with self._lock:
            self._held_durations.append(max(0.0, seconds))
            full = len(self._held_durations) >= self.MAX_HELD
        if full:
            self.flush()

    def session_closed(self, state: str) -> None:
        """`state`: evaluated, incomplete or evicted (`spanjudge.session.state`)."""
        if not self._batch:
            self._sessions.add(1, {semconv.SJ_SESSION_STATE: state})
            return
        with self._lock:
            self._held_closed[state] = self._held_closed.get(state, 0) + 1

    def non_agent_trace(self) -> None:
        self._non_agent.add(1)

    def internal_error(self, where: str) -> None:
        self._internal.add(1, {"where": where})

    def session_keys_refused(self, n: int) -> None:
        if n:
            self._keys_refused.add(n)
