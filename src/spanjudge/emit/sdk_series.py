"""Pre-aggregated histogram values into, and stale series out of, the OpenTelemetry metrics SDK.

The SDK takes one measurement per API call, and each call does its work once per metric reader
(exemplar filter, attribute hashing, locks): recording a session's histogram values one call at
a time was most of the sidecar's metrics cost. `SdkSeries.write` merges the values one series
collected since the last flush into the SDK's own explicit-bucket aggregation of every reader in
one step, exactly as that many `Histogram.record` (or `Counter.add`) calls would: same buckets,
sum (added in the same order), count, min and max.

The SDK also never forgets a series; `SdkSeries.forget` removes one from every reader (the
Collector's Prometheus exporter expires series after `metric_expiration` in the same way), so
that a series not updated for `labels.series_ttl` disappears from `/metrics` and the OTLP export.
Recorded again later, it starts from zero (a new start time; Prometheus sees a counter reset).

Both reach into SDK internals, so both are used only on the SDK minor versions whose internals
were checked (`CHECKED_SDK`; tests/emit/test_metrics_batch.py compares the result with the
public API's and fails when the installed SDK is not among them). Elsewhere, and wherever the
case is not the plain one (a View with another aggregation or an attribute filter, an exemplar
filter that may sample this value, a disabled meter, a no-op provider), `write` returns False
and the caller uses the public API; `forget` returns False where it cannot remove the series.
These are checks, not exception handlers: an error inside is a bug and is raised.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from typing import Any

from opentelemetry.context import get_current

# (major, minor) versions of opentelemetry-sdk whose internals this module was checked against.
CHECKED_SDK = frozenset({(1, 45)})


def sdk_checked() -> bool:
    """Whether the installed opentelemetry-sdk is one of `CHECKED_SDK`."""
    from opentelemetry.sdk.version import __version__

    major, _, rest = __version__.partition(".")
    minor = rest.partition(".")[0]
    return major.isdigit() and minor.isdigit() and (int(major), int(minor)) in CHECKED_SDK


class _Plan:
    """One instrument's SDK storages: its view matches (one per reader and view), the kind of
    value `write` may merge (None: public API only) and whether `forget` can remove series."""

    __slots__ = (
        "exemplar_filter",
        "exemplars",
        "forgettable",
        "kind",
        "matches",
        "real",
        "storages",
    )

    def __init__(self, storages: Any, real: Any, matches: list[Any], consumer: Any) -> None:
        self.storages = storages
        self.real = real
        self.matches = matches
        self.kind = _kind(matches)
        self.exemplar_filter = consumer._sdk_config.exemplar_filter
        self.exemplars = _exemplars(self.exemplar_filter)
        # a View's attribute filter folds several series into one: none can be removed alone
        self.forgettable = bool(matches) and all(m._view._attribute_keys is None for m in matches)


class SdkSeries:
    """Writes batches into, and forgets series from, the SDK storages of the instruments it is
    given; caches what it looked up (per instrument: its storages; per series: the SDK key)."""

    def __init__(self) -> None:
        self.checked = sdk_checked()
        self._plans: dict[int, _Plan | None] = {}
        self._keys: dict[tuple[tuple[str, str], ...], Any] = {}
        # (trace-based exemplar filter, context, its answer) of the last write that asked
        self._last_sampled: tuple[Any, Any, bool] | None = None

    def _plan(self, instrument: Any) -> _Plan | None:
        """The SDK's storages of ``instrument``, or None: not an SDK instrument we know."""
        if not self.checked:
            return None
        real = getattr(instrument, "_real_instrument", None) or instrument  # the API's proxy
        consumer = getattr(real, "_measurement_consumer", None)
        storages = getattr(consumer, "_reader_storages", None)
        if storages is None:  # a no-op or proxy instrument: nothing of the SDK's to write into
            return None
        plan = self._plans.get(id(instrument))
        # `_reader_storages` is replaced, never mutated, when a reader is added or removed
        if plan is not None and plan.storages is storages and plan.real is real:
            return plan
        matches: list[Any] = []
        for storage in list(storages.values()):
            matches.extend(storage._get_or_init_view_instrument_match(real))
        plan = _Plan(storages, real, matches, consumer)
        self._plans[id(instrument)] = plan
        return plan

    def _sampled(self, exemplar_filter: Any) -> bool:
        """Whether the trace-based ``exemplar_filter`` would offer a value recorded now to the
        reservoir. Its answer follows the current context alone (is its span sampled?), and
        contexts are immutable: asked once for each context writes come in, not per series."""
        context = get_current()
        last = self._last_sampled
        if last is not None and last[0] is exemplar_filter and last[1] is context:
            return last[2]
        sampled = bool(exemplar_filter.should_sample(0.0, 0, None, context))
        self._last_sampled = (exemplar_filter, context, sampled)
        return sampled

    def _key(self, items: tuple[tuple[str, str], ...]) -> Any:
        key = self._keys.get(items)
        if key is None:
            from opentelemetry.sdk.metrics._internal._view_instrument_match import (
                _hash_attributes,
            )

            key = self._keys[items] = _hash_attributes(dict(items))
        return key

    def write(self, instrument: Any, items: tuple[tuple[str, str], ...], values: Any) -> bool:
        """Add ``values`` (a list of histogram values, or a counter's summed increment) to one
        series at once; False: nothing was written, use the public API."""
        plan = self._plan(instrument)
        if plan is None:
            return False
        histogram = isinstance(values, list)
        if not plan.matches:  # no reader: record() would store nothing (bad values: its warnings)
            if histogram:
                return _recordable(values)
            return bool(math.isfinite(values) and values >= 0)
        if not plan.forgettable:
            return False
        if plan.kind != ("histogram" if histogram else "sum"):
            return False
        real = plan.real
        if not real._is_enabled():  # the meter's configuration may change at any time
            return False
        if plan.exemplars != "off" and (
            # the merge offers nothing to the exemplar reservoir: only where the SDK would not
            plan.exemplars == "any" or self._sampled(plan.exemplar_filter)
        ):
            return False
        key = self._key(items)
        if histogram:
            if not _recordable(values):  # what record() drops
                return False  # the SDK's own warnings for those
            _merge_histogram(plan.matches, key, items, values)
        else:
            if not (math.isfinite(values) and values >= 0):
                return False
            _merge_sum(plan.matches, key, items, values)
        return True

    def forget(self, instrument: Any, items: tuple[tuple[str, str], ...]) -> bool:
        """Remove one series of ``instrument`` from every reader (it reappears, from zero, when
        recorded again); False: it cannot be removed here (it stays exported)."""
        plan = self._plan(instrument)
        if plan is None or not plan.forgettable:
            return False
        key = self._key(items)
        self._keys.pop(items, None)
        for match in plan.matches:
            with match._lock:
                match._attributes_aggregation.pop(key, None)
        return True


def _kind(matches: list[Any]) -> str | None:
    """ "histogram" or "sum" when every storage aggregates that way, else None."""
    from opentelemetry.sdk.metrics._internal.aggregation import (
        _ExplicitBucketHistogramAggregation,
        _SumAggregation,
    )

    kinds = {type(match._aggregation) for match in matches}
    if kinds == {_ExplicitBucketHistogramAggregation}:
        return "histogram"
    if kinds == {_SumAggregation}:
        return "sum"
    return None


def _exemplars(exemplar_filter: Any) -> str:
    """When the SDK offers a value to the exemplar reservoir: "off" never, "trace" inside a
    sampled span (the same answer for every value of a flush), "any" (an unknown filter,
    whose decision may depend on each value: the public API only)."""
    from opentelemetry.sdk.metrics._internal.exemplar import (
        AlwaysOffExemplarFilter,
        TraceBasedExemplarFilter,
    )

    if type(exemplar_filter) is AlwaysOffExemplarFilter:
        return "off"
    return "trace" if type(exemplar_filter) is TraceBasedExemplarFilter else "any"


def _recordable(values: list[float]) -> bool:
    """Whether every one of ``values`` is finite and not negative, as record() takes them: their
    float sum is finite only if none is infinite or NaN, and then the least tells whether one
    is negative (two C-level passes, not a test per value). Finite values whose sum overflows say no
    as well: they go through the public API, which records them the same."""
    return not values or (math.isfinite(sum(values, 0.0)) and min(values) >= 0)


def _aggregation(match: Any, key: Any, items: tuple[tuple[str, str], ...]) -> Any:
    aggregation = match._attributes_aggregation.get(key)
    if aggregation is None:
        with match._lock:
            aggregation = match._get_or_create_aggregation(key, dict(items))
    return aggregation


def _merge_histogram(
    matches: list[Any], key: Any, items: tuple[tuple[str, str], ...], values: list[float]
) -> None:
    if not values:
        return
    low, high = min(values), max(values)
    for match in matches:
        if match._reset_on_collect:  # a delta collection may swap the storage: as record() does
            with match._lock:
                aggregation = match._get_or_create_aggregation(key, dict(items))
                _into_histogram(aggregation, values, low, high)
        else:
            _into_histogram(_aggregation(match, key, items), values, low, high)


def _into_histogram(aggregation: Any, values: list[float], low: float, high: float) -> None:
    bounds = aggregation._boundaries
    with aggregation._lock:
        if aggregation._value is None:
            aggregation._value = aggregation._get_empty_bucket_counts()
        counts = aggregation._value
        total = aggregation._sum
        for value in values:  # added one by one, as record() does: the same float sum
            counts[bisect_left(bounds, value)] += 1
            total += value
        aggregation._sum = total
        if aggregation._record_min_max:
            aggregation._min = min(aggregation._min, low)
            aggregation._max = max(aggregation._max, high)


def _merge_sum(
    matches: list[Any], key: Any, items: tuple[tuple[str, str], ...], amount: float
) -> None:
    for match in matches:
        if match._reset_on_collect:
            with match._lock:
                _into_sum(match._get_or_create_aggregation(key, dict(items)), amount)
        else:
            _into_sum(_aggregation(match, key, items), amount)


def _into_sum(aggregation: Any, amount: float) -> None:
    with aggregation._lock:
        aggregation._value = (aggregation._value or 0) + amount
