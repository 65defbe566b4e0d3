"""Key-less spans with `serve.workers: 2` land in the session one process would put them in,
and are judged once: also when the process that holds them closes their trace before its key
arrives (evicted over `max_open_bytes`), and when the key arrives later than half the idle
timeout. Real `spanjudge serve`, real OTLP exporters, verdicts compared with `workers: 1`."""

from __future__ import annotations

import time
import zlib
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, TraceFlags

from tests.sidecar.helpers import SidecarProcess, VerdictServer, wait_for
from tests.sidecar.workers_helpers import _config, _env

pytestmark = pytest.mark.slow


def _owner(key: str) -> int:
    return zlib.crc32(key.encode()) % 2


def _ids() -> tuple[str, str]:
    """A trace id and a session key that two processes give to different owners."""
    trace = f"{0x5EED:032x}"
    key = next(f"keyed-{i}" for i in range(100) if _owner(f"keyed-{i}") != _owner(trace))
    return trace, key


_NOW = time.time_ns()  # the same spans in both runs


def _span(trace: str, span: int, name: str, parent: int | None, **attributes: Any) -> ReadableSpan:
    now = _NOW + span * 1_000_000

    def ctx(span_id: int) -> SpanContext:
        return SpanContext(int(trace, 16), span_id, False, TraceFlags(1))

    return ReadableSpan(
        name=name,
        context=ctx(span),
        parent=ctx(parent) if parent else None,
        resource=Resource({"service.name": "agent"}),
        attributes=attributes,
        kind=SpanKind.INTERNAL,
        start_time=now - 2_000_000,
        end_time=now - 1_000_000,
        instrumentation_scope=InstrumentationScope("agent-test"),
    )


def _tool_calls(trace: str) -> list[ReadableSpan]:
    """Two tool calls under a root that has not ended yet: no session key on them."""
    return [
        _span(
            trace,
            10 + i,
            "execute_tool read_file",
            1,
            **{
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "read_file",
                "gen_ai.tool.call.id": f"call-{i}",
                "gen_ai.tool.call.arguments": '{"path": "data.csv"}',
                "gen_ai.tool.call.result": "a,b\n1,2\n",
            },
        )
        for i in range(2)
    ]


def _root(trace: str, key: str) -> list[ReadableSpan]:
    return [
        _span(
            trace,
            1,
            "invoke_agent agent",
            None,
            **{
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "agent",
                "session.id": key,
                "spanjudge.session.end": True,
            },
        )
    ]


def _verdicts(verdicts: VerdictServer) -> set[tuple[Any, ...]]:
    return {
        (
            v["session.id"],
            v["spanjudge.revision"],
            v["gen_ai.evaluation.name"],
            v["spanjudge.outcome"],
            v.get("spanjudge.reason"),
            v.get("gen_ai.evaluation.explanation"),
        )
        for v in verdicts.received.verdicts().values()
    }


def _run(tmp: Path, workers: int, sessions: dict[str, Any], wait_s: float) -> VerdictServer:
    """The tool calls of a trace, then (after ``wait_s``, or once the trace was judged alone
    when ``wait_s`` is 0) its root with the session key; every session judged at shutdown."""
    tmp.mkdir()
    trace, key = _ids()
    verdicts = VerdictServer()
    config = _config(tmp, workers, sessions=sessions, on_shutdown="evaluate")
    sidecar = SidecarProcess(tmp, config, _env(verdicts)).start()
    try:
        exporter = OTLPSpanExporter(endpoint=sidecar.endpoints["grpc"], insecure=True)
        assert exporter.export(_tool_calls(trace)) == SpanExportResult.SUCCESS
        if wait_s:
            time.sleep(wait_s)
        else:  # judged alone first (evicted)
            assert wait_for(lambda: trace in verdicts.received.sessions(), 20)
        assert exporter.export(_root(trace, key)) == SpanExportResult.SUCCESS
        exporter.shutdown()
        assert wait_for(lambda: key in verdicts.received.sessions(), 20)
        assert sidecar.terminate() == 0
    finally:
        if sidecar.proc is not None and sidecar.proc.poll() is None:
            sidecar.kill9()
    time.sleep(0.3)
    verdicts.stop()
    return verdicts


def test_keyless_spans_evicted_before_their_key_are_judged_once(tmp_path: Path) -> None:
    # a budget so small that the key-less trace is evicted (judged alone) at the first tick
    sessions = {"idle_timeout_s": 120, "end_grace_s": 0, "max_open_bytes": 1}
    one = _run(tmp_path / "one", 1, sessions, 0)
    two = _run(tmp_path / "two", 2, sessions, 0)
    trace, key = _ids()
    assert set(one.received.sessions()) == {trace, key}
    assert _verdicts(two) == _verdicts(one)
    assert all(revs == {1} for revs in two.received.sessions().values())


def test_a_key_later_than_half_the_idle_timeout_still_joins_its_spans(tmp_path: Path) -> None:
    sessions = {"idle_timeout_s": 3, "end_grace_s": 0}
    one = _run(tmp_path / "one", 1, sessions, 2.0)  # after idle/2, before idle
    two = _run(tmp_path / "two", 2, sessions, 2.0)
    _, key = _ids()
    assert set(one.received.sessions()) == {key}  # one process joined them
    assert _verdicts(two) == _verdicts(one)
