"""Shared test helpers: a real SDK tracer with deterministic ids, span factories."""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import Tracer

from spanjudge.guard import RAISE_ENV, contained
from spanjudge.spans.otlp_json import request_to_json_line, sdk_spans_to_request
from spanjudge.spans.record import SpanRecord

ROOT = Path(__file__).resolve().parent.parent
# Internal-error guards re-raise under the test suite (spanjudge/guard.py), in this process and in
# the spanjudge processes tests start; a test that makes something fail on purpose uses the
# `contained_errors` fixture (or `guard.contained()`, or drops the variable for a subprocess).
os.environ[RAISE_ENV] = "1"
# CI sets this (comma list: prometheus,promtool,chromium,strands...) so that a tool it installed
# but that went missing fails the run instead of quietly skipping its tests.
REQUIRED = {t.strip() for t in os.environ.get("SPANJUDGE_REQUIRE", "").split(",") if t.strip()}


# The test files that take longest, started first: with a worker per core (pytest-xdist, a file's
# tests in one worker, files handed out in this order) one of them started late would run alone
# at the end of the suite.
LONGEST_FIRST = (
    "tests/sidecar/test_flood.py",
    "tests/judges/test_real_llm.py",
    "tests/test_install.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        path = item.nodeid.split("::")[0]
        return LONGEST_FIRST.index(path) if path in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: every other test keeps its place


@pytest.fixture(autouse=True)
def _no_terminal_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test, and every process a test starts, sees standard output as a file or a pipe
    (the table's width is `PIPE_WIDTH`): no `COLUMNS`/`LINES` from the shell that runs the
    suite, nor the 80x24 a pytest-xdist worker finds in its environment. A test about the
    width sets `COLUMNS` itself."""
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)


@pytest.fixture
def contained_errors() -> Iterator[None]:
    """For a test that makes an evaluator, recogniser, sink or engine fail on purpose: the
    guards contain it as in production instead of re-raising."""
    with contained():
        yield


def unavailable(name: str, reason: str) -> None:
    """Skip (locally) or fail (in CI, where ``name`` is required) when a real part is missing."""
    if name in REQUIRED:
        pytest.fail(f"{name} is required here (SPANJUDGE_REQUIRE) but {reason}")
    pytest.skip(reason)


FIXTURES = ROOT / "fixtures"
SCHEMA = ROOT / "src" / "spanjudge" / "schemas" / "report.schema.json"


class CountingIds(IdGenerator):
    """Deterministic ids: 1, 2, 3... so tests can name them."""

    def __init__(self) -> None:
        self.spans = itertools.count(1)
        self.traces = itertools.count(1)

    def generate_span_id(self) -> int:
        return next(self.spans)

    def generate_trace_id(self) -> int:
        return next(self.traces)


def recorded(
    body: Callable[[Tracer], Any], resource: dict[str, Any] | None = None
) -> list[ReadableSpan]:
    """Run ``body`` with a real SDK tracer and return the finished spans."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(
        id_generator=CountingIds(), resource=Resource.create(resource or {"service.name": "test"})
    )
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    body(provider.get_tracer("test-agent"))
    provider.shutdown()
    return list(exporter.get_finished_spans())


def write_jsonl(path: Path, spans: list[ReadableSpan]) -> Path:
    path.write_text(request_to_json_line(sdk_spans_to_request(spans)) + "\n", encoding="utf-8")
    return path


def span(
    span_id: int,
    *,
    trace: int = 1,
    parent: int | None = None,
    name: str = "span",
    start: int = 0,
    end: int | None = None,
    attrs: dict[str, Any] | None = None,
    resource: dict[str, Any] | None = None,
    status: str = "unset",
) -> SpanRecord:
    """A SpanRecord with readable integer ids (for store/trajectory unit tests)."""
    return SpanRecord(
        trace_id=format(trace, "032x"),
        span_id=format(span_id, "016x"),
        parent_span_id=format(parent, "016x") if parent is not None else None,
        name=name,
        start_unix_nano=start,
        end_unix_nano=start + 1 if end is None else end,
        status=status,  # type: ignore[arg-type]
        attributes=attrs or {},
        resource=resource or {},
    )


def load_schema() -> dict[str, Any]:
    return json.loads(SCHEMA.read_text())


def scenario_files() -> Iterator[Path]:
    yield from sorted(FIXTURES.glob("*/scenarios.json"))


@pytest.fixture
def schema() -> dict[str, Any]:
    return load_schema()


def fake_distribution(
    site: Path,
    name: str,
    entry_points: dict[str, dict[str, str]],
    modules: dict[str, str],
) -> Path:
    """Write an installed distribution into ``site`` (a ``*.dist-info`` with ``entry_points.txt``
    and its modules), as pip would; put ``site`` on `sys.path` to install it."""
    info = site / f"{name}-1.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "".join(
            f"[{group}]\n" + "".join(f"{ep} = {target}\n" for ep, target in eps.items())
            for group, eps in entry_points.items()
        )
    )
    for module, source in modules.items():
        (site / f"{module}.py").write_text(source)
    return site
