"""Pre-aggregated histogram values into, and stale series out of, the OpenTelemetry metrics SDK.

The SDK takes one measurement per API call, and each call costs ~15 us per metric reader
(exemplar filter, attribute hashing, locks): recording a session's ~22 histogram values was
most of the sidecar's metrics cost. `SdkSeries.write` merges the values one series collected since
the last flush into the SDK's own explicit-bucket aggregation of every reader in one step,
exactly as that many `Histogram.record` (or `Counter.add`) calls would: same buckets, sum,
count, min and max.

The SDK also never forgets a series; `SdkSeries.forget` removes one from every reader (the
Collector's Prometheus exporter expires series after `metric_expiration` in the same way), so
that a series not updated for `labels.series_ttl` disappears from `/metrics` and the OTLP export.

Both reach into SDK internals (the SDK version is pinned in pyproject.toml, and
tests/emit/test_metrics_batch.py compares the result with the public API's). Where they are not
as expected (another SDK version, a View with another aggregation or an attribute filter, an
exemplar filter that samples everything, a no-op provider), `write` returns False and the
caller uses the public API, and `forget` does nothing.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from typing import Any


class SdkSeries:
    """Writes batches into, and forgets series from, the SDK storages of the instruments it is
    given; caches what it looked up (per instrument: its storages; per series: the SDK key)."""

    def __init__(self) -> None:
        self._plans: dict[int, tuple[Any, Any, list[Any] | None]] = {}
        self._keys: dict[tuple[tuple[str, str], ...], Any] = {}
        self.failed: BaseException | None = None  # internals not as expected: public API only

    def _plan(self, instrument: Any) -> list[Any] | None:
        """The SDK's storages of ``instrument`` (one per reader and view), when usable here."""
        real = getattr(instrument, "_real_instrument", None) or instrument  # the API's proxy
        consumer = getattr(real, "_measurement_consumer", None)
        storages = getattr(consumer, "_reader_storages", None)
        if storages is None:
            return None
        plan = self._plans.get(id(instrument))
        if plan is not None and plan[0] is storages and plan[1] is real:
            return plan[2]
        matches = _usable(real, consumer, storages)
        self._plans[id(instrument)] = (storages, real, matches)
        return matches

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
        if self.failed is not None:
            return False
        try:
            matches = self._plan(instrument)
            if matches is None:
                return False
            key = self._key(items)
        except Exception as exc:  # internals of another SDK version: the public API from now on
            self.failed = exc
            return False
        histogram = isinstance(values, list)
        if _kind(matches) != ("histogram" if histogram else "sum"):
            return False
        if histogram:
            good = [v for v in values if math.isfinite(v) and v >= 0]  # what record() keeps
            if len(good) != len(values):
                return False  # the SDK's own warnings for what it drops
            _merge_histogram(matches, key, items, good)
        else:
            if not (math.isfinite(values) and values >= 0):
                return False
            _merge_sum(matches, key, items, values)
        return True

    def forget(self, instrument: Any, items: tuple[tuple[str, str], ...]) -> None:
        """Remove one series of ``instrument`` from every reader; it reappears (from zero) when
        recorded again."""
        if self.failed is not None:
            return
        try:
            matches = self._plan(instrument)
            if matches is None:
                return
            key = self._key(items)
        except Exception as exc:
            self.failed = exc
            return
        self._keys.pop(items, None)
        for match in matches:
            with match._lock:
                match._attributes_aggregation.pop(key, None)


def _usable(real: Any, consumer: Any, storages: Any) -> list[Any] | None:
    from opentelemetry.sdk.metrics._internal.aggregation import (
        _ExplicitBucketHistogramAggregation,
        _SumAggregation,
    )
    from opentelemetry.sdk.metrics._internal.exemplar import AlwaysOnExemplarFilter

    enabled = getattr(real, "_is_enabled", None)
    if enabled is not None and not enabled():
        return None
    config = getattr(consumer, "_sdk_config", None)
    if isinstance(getattr(config, "exemplar_filter", None), AlwaysOnExemplarFilter):
        return None  # exemplars would be expected from every value
    matches: list[Any] = []
    for storage in list(storages.values()):
        matches.extend(storage._get_or_init_view_instrument_match(real))
    for match in matches:
        # a View's attribute filter may fold several series into one: the public API then
        if match._view._attribute_keys is not None:
            return None
        if type(match._aggregation) not in (_ExplicitBucketHistogramAggregation, _SumAggregation):
            return None
    if len({type(match._aggregation) for match in matches}) != 1:
        return None
    return matches or None


def _kind(matches: list[Any]) -> str | None:
    """ "histogram" or "sum" when every storage aggregates that way (checked by `_usable`)."""
    name = type(matches[0]._aggregation).__name__
    return {"_ExplicitBucketHistogramAggregation": "histogram", "_SumAggregation": "sum"}.get(name)


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
    total, low, high = math.fsum(values), min(values), max(values)
    for match in matches:
        if match._reset_on_collect:  # a delta collection may swap the storage: as record() does
            with match._lock:
                aggregation = match._get_or_create_aggregation(key, dict(items))
                _into_histogram(aggregation, values, total, low, high)
        else:
            _into_histogram(_aggregation(match, key, items), values, total, low, high)


def _into_histogram(
    aggregation: Any, values: list[float], total: float, low: float, high: float
) -> None:
    bounds = aggregation._boundaries
    with aggregation._lock:
        if aggregation._value is None:
            aggregation._value = aggregation._get_empty_bucket_counts()
        counts = aggregation._value
        for value in values:
            counts[bisect_left(bounds, value)] += 1
        aggregation._sum += total
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
