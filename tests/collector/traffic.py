"""Agent traffic for the Collector tests: fixture sessions from real Strands instrumentation,
re-run under fresh ids, sent with the OpenTelemetry SDK's OTLP exporter; `spanjudge serve`
configs and the fixture's own verdicts (from `spanjudge eval`) to compare with."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from spanjudge.spans.files import read_input
from spanjudge.spans.record import SpanRecord
from tests.sidecar.helpers import VerdictServer, to_sdk

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "fixtures" / "strands" / "strands_default.jsonl"
EXPECTATIONS = FIXTURE.parent / "expectations.yaml"
SESSION_KEYS = ("session.id", "gen_ai.conversation.id")


def sessions() -> dict[str, list[SpanRecord]]:
    """The fixture's sessions by session id, spans in file order."""
    out: dict[str, list[SpanRecord]] = {}
    for chunk in read_input(str(FIXTURE)):
        for span in chunk.spans:
            out.setdefault(str(span.attributes["session.id"]), []).append(span)
    return out


def copy(spans: list[SpanRecord], run: int) -> list[SpanRecord]:
    """The same session under session id "<id>-r<run>" and new trace/span ids (a repeated run)."""

    def xid(value: str | None) -> str | None:
        if value is None:
            return None
        bits = len(value) * 4
        return format(int(value, 16) ^ (run << (bits - 16)), f"0{len(value)}x")

    def rename(attrs: Any) -> dict[str, Any]:
        return {k: (f"{v}-r{run}" if k in SESSION_KEYS else v) for k, v in attrs.items()}

    return [
        dataclasses.replace(
            s,
            trace_id=xid(s.trace_id),
            span_id=xid(s.span_id),
            parent_span_id=xid(s.parent_span_id),
            links=tuple(
                dataclasses.replace(link, trace_id=xid(link.trace_id), span_id=xid(link.span_id))
                for link in s.links
            ),
            attributes=rename(s.attributes),
            resource=rename(s.resource),
        )
        for s in spans
    ]


def by_trace(spans: list[SpanRecord]) -> list[list[SpanRecord]]:
    """A session's spans per trace (one trace per turn in these fixtures), in start order."""
    groups: dict[str, list[SpanRecord]] = {}
    for span in sorted(spans, key=lambda s: s.start_unix_nano):
        groups.setdefault(span.trace_id, []).append(span)
    return list(groups.values())


def serve_config(
    directory: Path,
    *,
    grpc_endpoint: str = "127.0.0.1:0",
    idle_timeout_s: float = 3.0,
    **serve: Any,
) -> dict[str, Any]:
    """A `spanjudge serve` config; repeated runs ("-r<run>") share the fixture's expectations."""
    fixture = yaml.safe_load(EXPECTATIONS.read_text(encoding="utf-8"))["sessions"]
    expectations = directory / "expectations.yaml"
    expectations.write_text(
        yaml.safe_dump({"sessions": {f"{sid}-r*": body for sid, body in fixture.items()}})
    )
    return {
        # long enough that a loaded CI machine never splits a session between two exports
        "sessions": {"idle_timeout_s": idle_timeout_s},
        "expectations_files": [str(expectations)],
        "serve": {
            "grpc_endpoint": grpc_endpoint,
            "http_endpoint": None,
            "metrics_endpoint": "127.0.0.1:0",
            "tick_interval_s": 0.1,
            "spool": {"path": str(directory / "spool.db")},
            **serve,
        },
    }


def send(endpoint: str, spans: list[SpanRecord]) -> None:
    """Export with the SDK's OTLP/gRPC exporter; the receiver must acknowledge."""
    exporter = OTLPSpanExporter(endpoint=endpoint, insecure=True)
    try:
        assert exporter.export(to_sdk(spans)) == SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()


def skill_loaded_outcomes(
    by_session: dict[str, list[SpanRecord]], tmp: Path
) -> dict[str, set[tuple[str, str]]]:
    """Session id -> (outcome, skill) of its skill_loaded verdicts, from `spanjudge eval`."""
    config = tmp / "offline.yaml"
    config.write_text(yaml.safe_dump({"expectations_files": [str(EXPECTATIONS)]}))
    out = subprocess.run(
        [sys.executable, "-m", "spanjudge.cli", "eval", str(FIXTURE), "--config", str(config),
         "--format", "json"],
        capture_output=True, check=False, timeout=120,
    )  # fmt: skip
    assert out.returncode in (0, 1), out.stderr.decode()
    outcomes: dict[str, set[tuple[str, str]]] = {sid: set() for sid in by_session}
    for session in json.loads(out.stdout)["sessions"]:
        for verdict in session["verdicts"]:
            if verdict["evaluator"] == "skill_loaded":
                outcome = (verdict["outcome"], verdict["target"]["skill"])
                outcomes[session["session_id"]].add(outcome)
    return outcomes


def verdicts(server: VerdictServer) -> dict[str, tuple[Any, ...]]:
    """Verdict id -> (session, evaluator, outcome, score) as a replica exported them."""
    return {
        vid: (v["session.id"], v["gen_ai.evaluation.name"], v["spanjudge.outcome"],
              v.get("gen_ai.evaluation.score.value"))
        for vid, v in server.received.verdicts().items()
    }  # fmt: skip
