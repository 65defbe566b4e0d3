"""Fixture traces through the real OTLP exporters into a real `spanjudge serve`; the verdicts that
come back over OTLP are the ones `spanjudge eval` gives on the same files."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from spanjudge.spans.files import read_input
from spanjudge.values import Target, Verdict
from tests.sidecar.helpers import (
    FIXTURES,
    SidecarProcess,
    VerdictServer,
    serve_config,
    to_sdk,
    wait_for,
)

pytestmark = pytest.mark.slow

GRPC_FIXTURE = FIXTURES / "strands" / "strands_default.jsonl"
HTTP_FIXTURE = FIXTURES / "deepagents" / "deepagents.jsonl"


def _config(tmp: Path, **serve: Any) -> dict[str, Any]:
    config = serve_config(
        tmp,
        # long enough that a loaded CI machine never splits a session between two exports
        sessions={"idle_timeout_s": 3.0},
        **{
            "http_endpoint": "127.0.0.1:0",
            "metrics_endpoint": "127.0.0.1:0",
            "tick_interval_s": 0.1,
            **serve,
        },
    )
    expectations = [
        str(GRPC_FIXTURE.parent / "expectations.yaml"),
        str(HTTP_FIXTURE.parent / "expectations.yaml"),
    ]
    return {**config, "expectations_files": expectations}


def _expected(path: Path, config: Path) -> dict[str, tuple[str, str, float | None]]:
    """Verdict id -> (evaluator, outcome, score) from `spanjudge eval --format json`."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "spanjudge.cli",
            "eval",
            str(path),
            "--config",
            str(config),
            "--format",
            "json",
        ],
        capture_output=True,
        check=False,
    )
    assert out.returncode in (0, 1), out.stderr.decode()
    report = json.loads(out.stdout)
    expected = {}
    for session in report["sessions"]:
        for v in session["verdicts"]:
            t = v["target"]
            verdict = Verdict(
                evaluator=v["evaluator"],
                outcome=v["outcome"],
                score=v["score"],
                label=v["label"],
                explanation=v["explanation"],
                reason=v["reason"],
                target=Target(
                    skill=t["skill"],
                    span_id=t["span_id"],
                    tool_call_id=t["tool_call_id"],
                    turn=t["turn"],
                ),
            )
            sid = verdict.stable_id(session["session_id"], session["revision"])
            expected[sid] = (v["evaluator"], v["outcome"], v["score"])
    return expected


def _send(path: Path, exporter: Any) -> int:
    spans = 0
    for chunk in read_input(str(path)):
        assert exporter.export(to_sdk(chunk.spans)) == SpanExportResult.SUCCESS
        spans += len(chunk.spans)
    exporter.shutdown()
    return spans


def test_fixture_verdicts_over_otlp_match_offline_eval(tmp_path: Path) -> None:
    verdicts = VerdictServer()
    sidecar = SidecarProcess(
        tmp_path,
        _config(tmp_path),
        env={
            "OTEL_EXPORTER_OTLP_ENDPOINT": verdicts.endpoint,
            "OTEL_EXPORTER_OTLP_INSECURE": "true",
        },
    ).start()
    try:
        ep = sidecar.endpoints
        _send(GRPC_FIXTURE, GrpcExporter(endpoint=ep["grpc"], insecure=True, compression=None))
        _send(
            HTTP_FIXTURE,
            HttpExporter(endpoint=f"http://{ep['http']}/v1/traces", compression=Compression.Gzip),
        )
        expected = _expected(GRPC_FIXTURE, sidecar.config_path)
        expected.update(_expected(HTTP_FIXTURE, sidecar.config_path))
        assert len(expected) > 20
        assert wait_for(lambda: set(verdicts.received.verdicts()) >= set(expected), 30)
        got = verdicts.received.verdicts()
        for sid, (evaluator, outcome, score) in expected.items():
            event = got[sid]
            assert event["gen_ai.evaluation.name"] == evaluator
            assert event["spanjudge.outcome"] == outcome
            assert event.get("gen_ai.evaluation.score.value") == score
        assert set(got) == set(expected)  # nothing extra, nothing twice
        # every verdict also arrived as a log record with the same id
        assert wait_for(
            lambda: (
                {r.get("spanjudge.verdict.id") for r in verdicts.received.log_records}
                >= set(expected)
            )
        )
        metrics = urllib.request.urlopen(f"http://{ep['metrics']}/metrics").read().decode()
        assert "spanjudge_verdicts_total{" in metrics
        assert "spanjudge_sidecar_requests_total{" in metrics and 'result="ok"' in metrics
        assert sidecar.terminate() == 0
        # the OTLP metric exporter flushed on shutdown
        assert "spanjudge.verdicts" in verdicts.received.metric_names
    finally:
        if sidecar.proc and sidecar.proc.poll() is None:
            sidecar.kill9()
        verdicts.stop()
