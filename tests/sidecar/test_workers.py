"""`serve.workers: 2`: evaluation in two processes behind one real `spanjudge serve` gives what
one process gives, uses both, and a dead evaluation process is seen and stops the server."""

from __future__ import annotations

import collections
import os
import signal
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from spanjudge.sessions.keys import session_key
from spanjudge.spans.record import SpanRecord
from tests.sidecar.helpers import (
    SidecarProcess,
    VerdictServer,
    synthetic_session,
    to_sdk,
    wait_for,
)
from tests.sidecar.workers_helpers import _as_exported, _config, _env, _Receiver, _verdicts

pytestmark = pytest.mark.slow
_TICKS = os.sysconf("SC_CLK_TCK")


def _keyless_first(spans: list[SpanRecord]) -> int:
    """Key-less spans sent before the first keyed span of their trace."""
    keyed_traces: set[str] = set()
    early = 0
    for span in spans:
        if session_key(span) is not None:
            keyed_traces.add(span.trace_id)
        elif span.trace_id not in keyed_traces:
            early += 1
    return early


def _grpc(endpoints: dict[str, Any], spans: list[SpanRecord]) -> None:
    exporter = OTLPSpanExporter(endpoint=endpoints["grpc"], insecure=True)
    for i in range(0, len(spans), 3):  # small requests: a trace spans many of them
        assert exporter.export(to_sdk(spans[i : i + 3])) == SpanExportResult.SUCCESS
    exporter.shutdown()


def _every_transport(endpoints: dict[str, Any], spans: list[SpanRecord]) -> None:
    """Requests of 3 spans by turns over OTLP/gRPC, OTLP/HTTP protobuf and OTLP/HTTP JSON:
    a trace's key-less spans and its key arrive in different encodings."""
    exporter = OTLPSpanExporter(endpoint=endpoints["grpc"], insecure=True)
    for n, i in enumerate(range(0, len(spans), 3)):
        request = encode_spans(to_sdk(spans[i : i + 3]))
        if n % 3 == 0:
            assert exporter.export(to_sdk(spans[i : i + 3])) == SpanExportResult.SUCCESS
            continue
        if n % 3 == 1:
            body, content_type = request.SerializeToString(), "application/x-protobuf"
        else:
            body, content_type = json_format.MessageToJson(request).encode(), "application/json"
        assert _post(f"http://{endpoints['http']}/v1/traces", body, content_type) == 200
    exporter.shutdown()


def _post(url: str, body: bytes, content_type: str) -> int:
    """POST as the OTLP/HTTP exporters do (and as the gRPC one above retries UNAVAILABLE): an
    overloaded sidecar's 429 or 503 is sent again after its Retry-After."""
    for _ in range(60):
        post = urllib.request.Request(url, data=body, headers={"Content-Type": content_type})
        try:
            with urllib.request.urlopen(post, timeout=30) as answer:
                return int(answer.status)
        except urllib.error.HTTPError as refused:
            if refused.code not in (429, 503):
                raise
            time.sleep(float(refused.headers.get("Retry-After") or 1))
    raise AssertionError(f"{url} still refused the request after 60 tries")


def _run(
    tmp: Path, workers: int, spans: list[SpanRecord], send: Callable[..., None] = _grpc
) -> _Receiver:
    tmp.mkdir()
    verdicts = _Receiver()
    sidecar = SidecarProcess(tmp, _config(tmp, workers, on_shutdown="evaluate"), _env(verdicts))
    sidecar.start()
    try:
        send(sidecar.endpoints, spans)
        assert sidecar.terminate() == 0  # on_shutdown evaluate: every session is judged now
    finally:
        if sidecar.proc is not None and sidecar.proc.poll() is None:
            sidecar.kill9()
    time.sleep(0.5)
    verdicts.stop()
    return verdicts


def test_two_workers_give_the_verdicts_one_worker_gives(tmp_path: Path) -> None:
    spans = _as_exported()
    assert _keyless_first(spans) > 50  # the routing of waiting key-less spans is exercised
    one_server = _run(tmp_path / "one", 1, spans)
    one = _verdicts(one_server)
    two_server = _run(tmp_path / "two", 2, spans)
    two = _verdicts(two_server)
    assert len(one) > 100
    assert two == one
    # the same counts reached the metrics too (one /metrics, fed from both processes)
    counted = {k: v for k, v in one_server.counters.values.items() if "verdicts" in k[0]}
    assert sum(counted.values()) == len(one)
    assert two_server.counters.values == one_server.counters.values
    # each session judged once, its verdicts delivered as log records too
    assert all(len(revs) == 1 for revs in two_server.received.sessions().values())
    assert two_server.received.log_ids() == two_server.received.span_ids()


def test_two_workers_judge_alike_whatever_encoding_each_request_came_in(tmp_path: Path) -> None:
    # Protobuf spans cross to their evaluation process as they arrived, JSON ones decoded: a
    # trace's key-less spans held from one kind of request join the key from another.
    spans = _as_exported()
    one = _verdicts(_run(tmp_path / "one", 1, spans, _every_transport))
    two_server = _run(tmp_path / "two", 2, spans, _every_transport)
    assert len(one) > 100
    assert _verdicts(two_server) == one
    assert all(len(revs) == 1 for revs in two_server.received.sessions().values())


def _send_sessions(endpoint: str, prefix: str, n: int) -> list[str]:
    exporter = OTLPSpanExporter(endpoint=endpoint, insecure=True, timeout=30)
    sent = []
    for i in range(n):
        session_id = f"{prefix}-{i:03d}"
        if exporter.export(synthetic_session(session_id)) == SpanExportResult.SUCCESS:
            sent.append(session_id)
    exporter.shutdown()
    return sent


def test_sessions_are_spread_over_both_processes(tmp_path: Path) -> None:
    verdicts = VerdictServer()
    sidecar = SidecarProcess(tmp_path, _config(tmp_path, 2), _env(verdicts)).start()
    try:
        pids = sidecar.endpoints["workers"]
        assert len(pids) == 2 and sidecar.endpoints["pid"] not in pids
        before = [cpu_seconds(pid) for pid in pids]
        sent = _send_sessions(sidecar.endpoints["grpc"], "spread", 300)
        assert wait_for(lambda: set(verdicts.received.sessions()) >= set(sent), 60)
        used = [cpu_seconds(pid) - start for pid, start in zip(pids, before, strict=True)]
        # both evaluated a fair share (300 sessions hash about evenly over two processes)
        assert min(used) > 0.25 * sum(used), used
        assert sidecar.terminate() == 0
    finally:
        if sidecar.proc is not None and sidecar.proc.poll() is None:
            sidecar.kill9()
        verdicts.stop()


def cpu_seconds(pid: int) -> float:
    """User + system CPU of process ``pid`` so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def _healthz(http: str) -> int:
    try:
        with urllib.request.urlopen(f"http://{http}/healthz", timeout=5) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_kill9_of_an_evaluation_process_is_seen_and_nothing_is_lost(tmp_path: Path) -> None:
    verdicts = VerdictServer()
    sidecar = SidecarProcess(tmp_path, _config(tmp_path, 2), _env(verdicts)).start()
    second: SidecarProcess | None = None
    try:
        endpoint = sidecar.endpoints["grpc"]
        assert _healthz(sidecar.endpoints["http"]) == 200
        sent = _send_sessions(endpoint, "before", 40)
        assert len(sent) == 40
        victim = sidecar.endpoints["workers"][1]
        os.kill(victim, signal.SIGKILL)
        assert wait_for(lambda: _healthz(sidecar.endpoints["http"]) == 503, 10)
        assert sidecar.proc is not None
        assert sidecar.proc.wait(30) == 1  # exits by itself, visibly
        assert "evaluation process 1" in sidecar.log.read_text()
        # the next start on the same spool judges every acknowledged session, once
        second = SidecarProcess(tmp_path, _config(tmp_path, 2), _env(verdicts)).start()
        assert wait_for(lambda: set(verdicts.received.sessions()) >= set(sent), 60)
        assert all(revs == {1} for revs in verdicts.received.sessions().values())
        assert second.terminate() == 0
    finally:
        for proc in (sidecar, second):
            if proc is not None and proc.proc is not None and proc.proc.poll() is None:
                proc.kill9()
        verdicts.stop()


def test_shutdown_evaluate_with_two_workers_emits_each_session_once(tmp_path: Path) -> None:
    verdicts = VerdictServer()
    config = _config(tmp_path, 2, on_shutdown="evaluate")
    sidecar = SidecarProcess(tmp_path, config, _env(verdicts)).start()
    second: SidecarProcess | None = None
    try:
        endpoint = sidecar.endpoints["grpc"]
        # open sessions (no end marker) and ended ones still inside their end grace
        exporter = OTLPSpanExporter(endpoint=endpoint, insecure=True)
        open_ids = [f"open-{i:02d}" for i in range(30)]
        for session_id in open_ids:
            spans = synthetic_session(session_id, end=False)
            assert exporter.export(spans) == SpanExportResult.SUCCESS
        exporter.shutdown()
        ended = _send_sessions(endpoint, "ended", 30)
        assert sidecar.terminate() == 0
        expected = set(open_ids) | set(ended)
        assert wait_for(lambda: set(verdicts.received.sessions()) >= expected, 10)
        # a restart on the same spool has nothing left to emit
        second = SidecarProcess(tmp_path, config, _env(verdicts)).start()
        time.sleep(2.0)
        assert second.terminate() == 0
        counts: dict[str, int] = {}
        for span in verdicts.received.eval_spans:
            session_id = span["attrs"]["session.id"]
            counts[session_id] = counts.get(session_id, 0) + 1
        assert set(counts) == expected
        assert set(counts.values()) == {1}, {k: v for k, v in counts.items() if v != 1}
        records = collections.Counter(
            r["spanjudge.verdict.id"] for r in verdicts.received.log_records
        )
        assert records and set(records.values()) == {1}
    finally:
        for proc in (sidecar, second):
            if proc is not None and proc.proc is not None and proc.proc.poll() is None:
                proc.kill9()
        verdicts.stop()


def test_workers_setting_is_checked(tmp_path: Path) -> None:
    sidecar = SidecarProcess(tmp_path, _config(tmp_path, 0))
    with pytest.raises(RuntimeError, match=r"serve\.workers: at least 1"):
        sidecar.start()
    assert sidecar.proc is not None and sidecar.proc.wait(10) == 2


def test_send_loop_keeps_working_under_concurrent_clients(tmp_path: Path) -> None:
    """Several client threads at once: every acknowledged session is judged once."""
    verdicts = VerdictServer()
    sidecar = SidecarProcess(tmp_path, _config(tmp_path, 2), _env(verdicts)).start()
    try:
        endpoint = sidecar.endpoints["grpc"]
        results: list[list[str]] = []

        def client(i: int) -> None:
            results.append(_send_sessions(endpoint, f"c{i}", 40))

        threads = [threading.Thread(target=client, args=(i,)) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        sent = {s for part in results for s in part}
        assert len(sent) == 160
        assert wait_for(lambda: set(verdicts.received.sessions()) >= sent, 60)
        assert all(revs == {1} for revs in verdicts.received.sessions().values())
        assert sidecar.terminate() == 0
    finally:
        if sidecar.proc is not None and sidecar.proc.poll() is None:
            sidecar.kill9()
        verdicts.stop()


def _default_config(tmp: Path) -> dict[str, Any]:
    config = _config(tmp, 1)
    del config["serve"]["workers"]
    return config


def test_workers_default_to_the_cores_serve_may_run_on(tmp_path: Path) -> None:
    sidecar = SidecarProcess(tmp_path, _default_config(tmp_path)).start()
    try:
        cores = len(os.sched_getaffinity(0))
        assert len(sidecar.endpoints["workers"]) == (cores if cores > 1 else 0)
        assert sidecar.terminate() == 0
    finally:
        if sidecar.proc is not None and sidecar.proc.poll() is None:
            sidecar.kill9()


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to narrow")
def test_workers_default_follows_a_narrowed_cpu_affinity(tmp_path: Path) -> None:
    """`taskset -c 0 spanjudge serve` (or a one-CPU cpuset) evaluates in the serve process."""
    cpu = min(os.sched_getaffinity(0))
    sidecar = SidecarProcess(tmp_path, _default_config(tmp_path))
    original = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})  # inherited by the serve process started now
    try:
        sidecar.start()
    finally:
        os.sched_setaffinity(0, original)
    try:
        assert sidecar.endpoints["workers"] == []
        assert sidecar.terminate() == 0
    finally:
        if sidecar.proc is not None and sidecar.proc.poll() is None:
            sidecar.kill9()
