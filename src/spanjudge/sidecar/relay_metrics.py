"""Metrics recorded on the global meter provider inside an evaluation process (`serve.workers`
> 1), relayed to the serve process's provider, where one process would have recorded them.

LLM judges count their calls and tokens (`spanjudge.judge.calls`, `spanjudge.judge.tokens`) on
the global meter provider, and so may plugin evaluators, judges and sinks. In an evaluation
process that provider is a `RelayMeterProvider`: counters and up-down counters add into a table
of deltas, histograms keep their values, and each progress message takes them to the serve
process, where `replay` records them on its global provider (the one `/metrics` and the OTLP
metric export read). Asynchronous instruments and gauges stay no-ops there: what they observe
is the evaluation process's own state, which the serve process cannot read.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from opentelemetry import metrics
from opentelemetry.metrics import (
    Counter,
    Histogram,
    Meter,
    NoOpCounter,
    NoOpHistogram,
    NoOpMeter,
    NoOpUpDownCounter,
    UpDownCounter,
)

# (meter name, meter version, instrument kind, name, unit, description, histogram boundaries)
Instrument = tuple[str, str | None, str, str, str, str, tuple[float, ...] | None]
Attributes = tuple[tuple[str, Any], ...]
# what one evaluation process recorded since its last message
Sums = dict[tuple[Instrument, Attributes], float]
Values = dict[tuple[Instrument, Attributes], list[float]]
Taken = tuple[Sums, Values]


def _attributes(attributes: Any) -> Attributes:
    if not attributes:
        return ()
    return tuple(
        sorted(
            (str(k), tuple(v) if isinstance(v, (list, tuple)) else v)
            for k, v in dict(attributes).items()
        )
    )


class _Table:
    """Deltas since the last `take`, any thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sums: Sums = {}
        self.values: Values = {}

    def add(self, instrument: Instrument, amount: float, attributes: Any) -> None:
        key = (instrument, _attributes(attributes))
        with self.lock:
            self.sums[key] = self.sums.get(key, 0) + amount

    def record(self, instrument: Instrument, amount: float, attributes: Any) -> None:
        key = (instrument, _attributes(attributes))
        with self.lock:
            self.values.setdefault(key, []).append(amount)

    def take(self) -> Taken:
        with self.lock:
            sums, self.sums = self.sums, {}
            values, self.values = self.values, {}
        return sums, values


class _Counter(NoOpCounter):
    def __init__(self, table: _Table, instrument: Instrument) -> None:
        super().__init__(instrument[3])
        self._table, self._instrument = table, instrument

    def add(self, amount: int | float, attributes: Any = None, context: Any = None) -> None:
        if amount < 0:  # the SDK refuses it too (with a warning): nothing recorded
            return
        self._table.add(self._instrument, amount, attributes)


class _UpDownCounter(NoOpUpDownCounter):
    def __init__(self, table: _Table, instrument: Instrument) -> None:
        super().__init__(instrument[3])
        self._table, self._instrument = table, instrument

    def add(self, amount: int | float, attributes: Any = None, context: Any = None) -> None:
        self._table.add(self._instrument, amount, attributes)


class _Histogram(NoOpHistogram):
    def __init__(self, table: _Table, instrument: Instrument) -> None:
        super().__init__(instrument[3])
        self._table, self._instrument = table, instrument

    def record(self, amount: int | float, attributes: Any = None, context: Any = None) -> None:
        self._table.record(self._instrument, amount, attributes)


class _Meter(NoOpMeter):
    def __init__(self, table: _Table, name: str, version: str | None) -> None:
        super().__init__(name, version=version)
        self._table = table

    def _instrument(
        self,
        kind: str,
        name: str,
        unit: str,
        description: str,
        boundaries: Sequence[float] | None = None,
    ) -> Instrument:
        bounds = tuple(boundaries) if boundaries is not None else None
        return (self.name, self.version, kind, name, unit, description, bounds)

    def create_counter(self, name: str, unit: str = "", description: str = "") -> Counter:
        return _Counter(self._table, self._instrument("counter", name, unit, description))

    def create_up_down_counter(
        self, name: str, unit: str = "", description: str = ""
    ) -> UpDownCounter:
        instrument = self._instrument("up_down_counter", name, unit, description)
        return _UpDownCounter(self._table, instrument)

    def create_histogram(
        self,
        name: str,
        unit: str = "",
        description: str = "",
        *,
        explicit_bucket_boundaries_advisory: Sequence[float] | None = None,
    ) -> Histogram:
        instrument = self._instrument(
            "histogram", name, unit, description, explicit_bucket_boundaries_advisory
        )
        return _Histogram(self._table, instrument)


class RelayMeterProvider(metrics.NoOpMeterProvider):
    """The global meter provider of an evaluation process."""

    def __init__(self) -> None:
        self._table = _Table()

    def get_meter(
        self,
        name: str,
        version: str | None = None,
        schema_url: str | None = None,
        attributes: Any = None,
    ) -> Meter:
        return _Meter(self._table, name, version)

    def take(self) -> Taken:
        return self._table.take()


class Replayer:
    """The serve process's side: records relayed deltas on its global meter provider."""

    def __init__(self) -> None:
        self._instruments: dict[Instrument, Any] = {}

    def _get(self, instrument: Instrument) -> Any:
        made = self._instruments.get(instrument)
        if made is None:
            meter_name, version, kind, name, unit, description, bounds = instrument
            meter = metrics.get_meter_provider().get_meter(meter_name, version)
            if kind == "histogram":
                made = meter.create_histogram(
                    name,
                    unit=unit,
                    description=description,
                    explicit_bucket_boundaries_advisory=bounds,
                )
            elif kind == "up_down_counter":
                made = meter.create_up_down_counter(name, unit=unit, description=description)
            else:
                made = meter.create_counter(name, unit=unit, description=description)
            self._instruments[instrument] = made
        return made

    def replay(self, taken: Taken) -> None:
        sums, values = taken
        for (instrument, attributes), amount in sums.items():
            self._get(instrument).add(amount, dict(attributes))
        for (instrument, attributes), recorded in values.items():
            histogram = self._get(instrument)
            for amount in recorded:
                histogram.record(amount, dict(attributes))
