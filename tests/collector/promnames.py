"""The Prometheus series names spanjudge emits, and the metric names a PromQL expression uses.

The instruments are read from spanjudge's own code (a recording meter captures every
``create_*`` call of the metric sinks), then translated the way the OpenTelemetry Prometheus
exporters do: dots to underscores, the unit as a suffix (``s`` -> ``_seconds``, ``By`` ->
``_bytes``; ``1`` and ``{annotations}`` add nothing), ``_total`` on counters,
``_bucket``/``_sum``/``_count`` on histograms.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from spanjudge import semconv

UNIT_SUFFIXES = {"s": "seconds", "ms": "milliseconds", "By": "bytes", "%": "percent"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Instrument:
    """One OpenTelemetry instrument as created by spanjudge."""

    name: str
    kind: str  # counter, histogram, gauge, updown
    unit: str


class _RecordingMeter:
    def __init__(self, seen: list[Instrument]) -> None:
        self._seen = seen

    def _add(self, kind: str, name: str, unit: str = "", **_: Any) -> object:
        self._seen.append(Instrument(name=name, kind=kind, unit=unit))
        return _Noop()

    def create_counter(self, name: str, unit: str = "", **kw: Any) -> object:
        return self._add("counter", name, unit, **kw)

    def create_histogram(self, name: str, unit: str = "", **kw: Any) -> object:
        return self._add("histogram", name, unit, **kw)

    def create_observable_gauge(
        self, name: str, callbacks: Any = None, unit: str = "", **kw: Any
    ) -> object:
        return self._add("gauge", name, unit, **kw)

    def create_up_down_counter(self, name: str, unit: str = "", **kw: Any) -> object:
        return self._add("updown", name, unit, **kw)

    def create_observable_counter(
        self, name: str, callbacks: Any = None, unit: str = "", **kw: Any
    ) -> object:
        return self._add("counter", name, unit, **kw)


class _Noop:
    def add(self, *args: Any, **kwargs: Any) -> None:
        """Instruments are created, never used, while recording."""

    def record(self, *args: Any, **kwargs: Any) -> None:
        """Instruments are created, never used, while recording."""


class RecordingMeterProvider:
    """A meter provider that only remembers which instruments were created."""

    def __init__(self) -> None:
        self.instruments: list[Instrument] = []

    def get_meter(self, *args: Any, **kwargs: Any) -> _RecordingMeter:
        return _RecordingMeter(self.instruments)


def spanjudge_instruments() -> list[Instrument]:
    """Every instrument the metric sinks, the self-telemetry, the sidecar and the judges create."""
    from spanjudge.emit.metrics import MetricsSink, SelfTelemetry
    from spanjudge.judges.reliability import CallCore, CallPolicy

    provider = RecordingMeterProvider()
    MetricsSink(provider)
    SelfTelemetry(provider)
    CallCore("recording", CallPolicy(), transport=_no_transport, meter_provider=provider)  # type: ignore[arg-type]
    try:
        from spanjudge.sidecar.handling import SidecarTelemetry
    except ImportError:  # the sidecar is optional for this catalogue
        pass
    else:
        # a sidecar with a spool: its limit gauge exists only then
        SidecarTelemetry(provider, worker=_WithSpool())  # type: ignore[arg-type]
    return provider.instruments


class _WithSpool:
    """Just enough of a sidecar worker for its telemetry to register every instrument."""

    class spool:
        max_bytes = 1
        bytes = 0

    pending_spans = 0


def _no_transport(*args: Any) -> Any:
    raise AssertionError("the recording judge is never called")


def base_name(instrument: Instrument) -> str:
    """OTel name + unit suffix, as the Prometheus exporters spell it (no type suffix)."""
    name = re.sub(r"[^a-zA-Z0-9:]", "_", instrument.name)
    unit = re.sub(r"\{.*\}", "", instrument.unit)
    suffix = UNIT_SUFFIXES.get(unit, "" if unit in ("", "1") else unit)
    if suffix and not name.endswith("_" + suffix):
        name = f"{name}_{suffix}"
    return name


def series_names(instrument: Instrument) -> set[str]:
    """Every series name one instrument produces on a Prometheus /metrics page."""
    name = base_name(instrument)
    if instrument.kind == "counter":
        return {name + "_total"}
    if instrument.kind == "histogram":
        return {name + "_bucket", name + "_sum", name + "_count"}
    return {name}


def emitted_series(instruments: Iterable[Instrument] | None = None) -> set[str]:
    """Every Prometheus series name spanjudge can emit."""
    found = spanjudge_instruments() if instruments is None else instruments
    return {series for inst in found for series in series_names(inst)}


def _label(attribute: str) -> str:
    return re.sub(r"[^a-zA-Z0-9]", "_", attribute)


# Labels the instruments carry (semconv attribute names, sanitised), plus the ones Prometheus
# and the Collector add: job/instance from the scrape target or service.name/.instance.id, `le`
# on histogram buckets.
KNOWN_LABELS = {
    _label(a)
    for a in (
        semconv.GEN_AI_EVALUATION_NAME,
        semconv.SJ_OUTCOME,
        semconv.SJ_REASON,
        semconv.GEN_AI_AGENT_NAME,
        semconv.GEN_AI_SKILL_NAME,
        semconv.GEN_AI_TOKEN_TYPE,
        semconv.SJ_SESSION_STATE,
        semconv.DROP_REASON,
        semconv.EXPORT_SIGNAL,
        semconv.SJ_JUDGE,
        semconv.JUDGE_CALL_OUTCOME,
        semconv.SIDECAR_TRANSPORT,
        semconv.SIDECAR_RESULT,
    )
} | {"job", "instance", "le"}

_KEYWORDS = {
    "and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right",
    "offset", "bool", "inf", "nan", "atan2",
}  # fmt: skip
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
_MATCHERS = re.compile(r"\{([^}]*)\}")
_RANGES = re.compile(r"\[[^\]]*\]")
_VARIABLES = re.compile(r"\$\{[^}]*\}|\$\w+")
_IDENT = re.compile(r"(?<![\w.])[a-zA-Z_:][a-zA-Z0-9_:]*")
_CALL = re.compile(r"\s*\(")


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads (functions, keywords and labels excluded)."""
    text = _STRINGS.sub('""', expr)
    text = _VARIABLES.sub("", text)
    text = _RANGES.sub("", text)
    text = _GROUPING.sub(" ", text)
    text = _MATCHERS.sub(" ", text)
    text = re.sub(r"\boffset\s+\w+", " ", text)
    names = set()
    for match in _IDENT.finditer(text):
        if _CALL.match(text, match.end()):
            continue  # a function or aggregation: sum(, rate(, histogram_quantile(
        if match[0] not in _KEYWORDS:
            names.add(match[0])
    return names


def label_names(expr: str) -> set[str]:
    """The label names an expression matches on or groups by."""
    text = _STRINGS.sub('""', _VARIABLES.sub("", expr))
    names: set[str] = set()
    for _, group in _GROUPING.findall(text):
        names.update(n.strip() for n in group.split(",") if n.strip())
    for body in _MATCHERS.findall(text):
        names.update(re.findall(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)", body))
    return names - {"__name__"}
