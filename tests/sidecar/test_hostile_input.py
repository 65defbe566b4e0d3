"""`spanjudge serve` against hostile input and configuration: a backtracking pattern, a YAML alias
bomb, long session ids and agent names, and a chunked HTTP body."""

from __future__ import annotations

import http.client
import json
import re
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import grpc
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.sidecar.helpers import SidecarProcess, VerdictServer, synthetic_session, wait_for
from tests.sidecar.workers_helpers import _config, _env
from tests.support.load import EXPORT, rss_bytes

pytestmark = pytest.mark.slow


def _asking(session_id: str, request: str) -> list[ReadableSpan]:
    """One ended agent turn whose user request is ``request``."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    messages = [{"role": "user", "parts": [{"type": "text", "content": request}]}]
    attrs = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "agent",
        "session.id": session_id,
        "gen_ai.input.messages": json.dumps(messages),
        "spanjudge.session.end": True,
    }
    with provider.get_tracer("hostile").start_as_current_span(
        "invoke_agent agent", attributes=attrs
    ):
        pass
    provider.shutdown()
    return list(exporter.get_finished_spans())


def _export(sidecar: SidecarProcess, *sessions: list[ReadableSpan]) -> None:
    exporter = OTLPSpanExporter(endpoint=sidecar.endpoints["grpc"], insecure=True)
    try:
        for spans in sessions:
            assert exporter.export(spans) == SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()


def _call(sidecar: SidecarProcess, spans: list[ReadableSpan]) -> grpc.StatusCode:
    """One OTLP/gRPC export call, not retried: what serve answered it."""
    target = sidecar.endpoints["grpc"].removeprefix("http://")
    body = encode_spans(spans).SerializeToString()
    with grpc.insecure_channel(target) as channel:
        call = channel.unary_unary(EXPORT, request_serializer=None, response_deserializer=None)
        try:
            call(body, timeout=30)
        except grpc.RpcError as exc:
            return exc.code()
    return grpc.StatusCode.OK


def test_a_backtracking_pattern_cannot_stall_evaluation(tmp_path: Path) -> None:
    """A request crafted against `^(a+)+$` is judged at once, and so is every later session, on
    either evaluation process; no request is refused."""
    verdicts = VerdictServer()
    config = _config(tmp_path, 2)
    config["expectations"] = [{"when": {"request_matches": "^(a+)+$"}, "skills": ["x"]}]
    sidecar = SidecarProcess(tmp_path, config, env=_env(verdicts)).start()
    later = [f"later-{i:02d}" for i in range(43)]
    try:
        assert _call(sidecar, _asking("crafted", "a" * 34 + "!")) == grpc.StatusCode.OK
        for i, session in enumerate(later):
            assert _call(sidecar, _asking(session, "a" * (i % 5 + 1))) == grpc.StatusCode.OK
        expected = {"crafted", *later}
        assert wait_for(lambda: expected <= set(verdicts.received.log_ids()), 60), sorted(
            expected - set(verdicts.received.log_ids())
        )
        # the pattern still does its work: only the matching requests are expected to load x
        reasons = {
            record["session.id"]: record.get("spanjudge.reason")
            for record in verdicts.received.log_records
            if record["gen_ai.evaluation.name"] == "skill_loaded"
        }
        assert reasons["crafted"] == "no_expectation"
        assert all(reasons[session] != "no_expectation" for session in later)
    finally:
        assert sidecar.terminate() == 0
        verdicts.stop()


@pytest.mark.parametrize(
    ("pattern", "problem"), [(r"(a)\1", "backreferences"), (r"(?<=a)b", "look-around")]
)
def test_a_pattern_that_needs_backtracking_is_a_config_error_at_start(
    tmp_path: Path, pattern: str, problem: str
) -> None:
    config = _config(tmp_path, 1)
    config["expectations"] = [{"when": {"request_matches": pattern}, "skills": ["x"]}]
    sidecar = SidecarProcess(tmp_path, config)
    with pytest.raises(RuntimeError, match="sidecar exited") as raised:
        sidecar.start()
    assert "expectations[0].when.request_matches" in str(raised.value)
    assert problem in str(raised.value)


def test_a_yaml_alias_bomb_is_refused_at_start(tmp_path: Path) -> None:
    """Nine levels of nine aliases under `expectations[].skills`: refused in moments, naming the
    file, not expanded."""
    lines = ['l0: &l0 ["s", "s", "s", "s", "s", "s", "s", "s", "s"]']
    for level in range(1, 9):
        lines.append(f"l{level}: &l{level} [{', '.join([f'*l{level - 1}'] * 9)}]")
    lines.append("expectations: [{when: {request_matches: x}, skills: *l8}]")
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines) + "\n")

    def limit_memory() -> None:  # the old expansion must fail the test, not the machine
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (1 << 31, 1 << 31))

    done = subprocess.run(
        [sys.executable, "-m", "spanjudge.sidecar", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=limit_memory,
        check=False,
    )
    assert done.returncode != 0
    assert str(path) in done.stderr
    assert "aliases expand to more than" in done.stderr


def test_long_session_ids_stay_distinct_and_say_they_were_cut(tmp_path: Path) -> None:
    verdicts = VerdictServer()
    sidecar = SidecarProcess(tmp_path, _config(tmp_path, 1), env=_env(verdicts)).start()
    long_id = "x" * (1 << 20)
    try:
        _export(sidecar, synthetic_session(long_id + "A"), synthetic_session(long_id + "B"))
        assert wait_for(lambda: len(verdicts.received.log_ids()) >= 2, 30)
        ids = set(verdicts.received.log_ids())
        assert len(ids) == 2
        for shown in ids:
            assert shown.startswith("x" * 256)
            assert len(shown) < 1024
            assert "cut" in shown
    finally:
        assert sidecar.terminate() == 0
        verdicts.stop()


def test_long_agent_names_keep_metrics_and_memory_small(tmp_path: Path) -> None:
    """104 sessions whose agent names are 16,000 characters long (`AGENT`, then `z`s, then a
    counter): the names in metric labels are cut (and counted), so one scrape of `/metrics`
    stays a few megabytes and serve's memory does not grow by the names' copies."""
    verdicts = VerdictServer()
    config = _config(tmp_path, 1, metrics_endpoint="127.0.0.1:0")
    sidecar = SidecarProcess(tmp_path, config, env=_env(verdicts)).start()
    assert sidecar.proc is not None
    pids = [sidecar.proc.pid, *sidecar.endpoints["workers"]]
    baseline = {pid: rss_bytes(pid) for pid in pids}
    sessions = [f"long-{i:03d}" for i in range(104)]
    try:
        for first in range(0, len(sessions), 26):  # four requests, far below the size limit
            spans = [
                span
                for i in range(first, first + 26)
                for span in synthetic_session(sessions[i], agent=f"AGENT{'z' * 16_000}{i}")
            ]
            assert _call(sidecar, spans) == grpc.StatusCode.OK
        assert wait_for(lambda: set(sessions) <= set(verdicts.received.log_ids()), 60)
        url = f"http://{sidecar.endpoints['metrics']}/metrics"

        def scrape() -> str:
            with urllib.request.urlopen(url, timeout=30) as response:
                return str(response.read().decode())

        assert wait_for(lambda: "spanjudge_label_values_cut_total" in scrape(), 30)
        text = scrape()
        # Every agent name, cut, makes a few hundred series (up to `labels.max_label_values`
        # names): each line stays short, and the scrape a few megabytes, where the names
        # whole would make each line 16,000 characters and the scrape hundreds of megabytes.
        assert max(len(line) for line in text.splitlines()) < 1_000
        assert len(text) < 16_000_000
        # past `labels.max_label_values` names (100) the rest count as `other`
        names = set(re.findall(r'gen_ai_agent_name="([^"]+)"', text)) - {"other"}
        assert len(names) == 100
        assert all(name.startswith("AGENT" + "z" * 100) and len(name) < 160 for name in names)
        (cut,) = re.findall(r"^spanjudge_label_values_cut_total(?:\{[^}]*\})? (\S+)$", text, re.M)
        assert float(cut) >= len(names)
        growth = {pid: rss_bytes(pid) - baseline[pid] for pid in pids}
        assert all(grown < 100 * 1024 * 1024 for grown in growth.values()), growth
    finally:
        assert sidecar.terminate() == 0
        verdicts.stop()


def _chunked_post(sidecar: SidecarProcess, body: bytes) -> tuple[int, bytes]:
    host, port = sidecar.endpoints["http"].rsplit(":", 1)
    connection = http.client.HTTPConnection(host.removeprefix("http://"), int(port), timeout=30)
    try:
        pieces = (body[i : i + 1000] for i in range(0, len(body), 1000))
        connection.request(
            "POST",
            "/v1/traces",
            body=pieces,
            headers={"Content-Type": "application/x-protobuf"},
            encode_chunked=True,
        )
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def _protobuf(spans: list[ReadableSpan]) -> bytes:
    request: ExportTraceServiceRequest = encode_spans(spans)
    return request.SerializeToString()


def test_a_chunked_body_is_decoded_within_the_size_limit(tmp_path: Path) -> None:
    verdicts = VerdictServer()
    config = _config(tmp_path, 1, input={"max_request_bytes": 200_000})
    sidecar = SidecarProcess(tmp_path, config, env=_env(verdicts)).start()
    try:
        status, _ = _chunked_post(sidecar, _protobuf(synthetic_session("chunked")))
        assert status == 200
        assert wait_for(lambda: "chunked" in verdicts.received.log_ids(), 30)
        big: Any = _protobuf(synthetic_session("too-big", agent="a" * 300_000))
        status, _ = _chunked_post(sidecar, big)
        assert status == 413
    finally:
        assert sidecar.terminate() == 0
        verdicts.stop()
