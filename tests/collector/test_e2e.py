"""The shipped alerts and the scale-out routing against a real `spanjudge serve`.

1. A real Prometheus on loopback scrapes a real sidecar that the real OTLP exporter feeds with
   fixture traces; the alert expressions, queried through Prometheus's HTTP API, return the
   failing skill and nothing for a healthy run.
2. Three sidecar replicas get spans routed by session id over a consistent-hash ring (the idea of
   the Collector's load_balancing exporter; no Collector binary here): each session is evaluated
   by exactly one replica, and the union of their verdicts equals a single-replica run.
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from spanjudge.spans.files import read_input
from spanjudge.spans.record import SpanRecord
from tests.collector.promnames import metric_names
from tests.conftest import unavailable
from tests.sidecar.helpers import SidecarProcess, VerdictServer, to_sdk, wait_for

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "fixtures" / "strands" / "strands_default.jsonl"
EXPECTATIONS = FIXTURE.parent / "expectations.yaml"
RULES = ROOT / "collector-config" / "prometheus" / "spanjudge-alerts.yaml"
PROMETHEUS = shutil.which("prometheus")
SESSION_KEYS = ("session.id", "gen_ai.conversation.id")


def _sessions() -> dict[str, list[SpanRecord]]:
    out: dict[str, list[SpanRecord]] = {}
    for chunk in read_input(str(FIXTURE)):
        for span in chunk.spans:
            out.setdefault(str(span.attributes["session.id"]), []).append(span)
    return out


def _copy(spans: list[SpanRecord], run: int) -> list[SpanRecord]:
    """The same session under a new session id and new trace/span ids (a repeated run)."""

    def xid(value: str | None) -> str | None:
        if value is None:
            return None
        bits = len(value) * 4
        return format(int(value, 16) ^ (run << (bits - 8)), f"0{len(value)}x")

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


def _config(tmp: Path, **serve: Any) -> dict[str, Any]:
    # Repeated runs carry "-r<run>" session ids: the fixture's expectations apply to them too.
    fixture = yaml.safe_load(EXPECTATIONS.read_text(encoding="utf-8"))["sessions"]
    expectations = tmp / "expectations.yaml"
    expectations.write_text(
        yaml.safe_dump({"sessions": {f"{sid}-r*": body for sid, body in fixture.items()}})
    )
    return {
        # long enough that a loaded CI machine never splits a session between two exports
        "sessions": {"idle_timeout_s": 3.0},
        "expectations_files": [str(expectations)],
        "serve": {
            "grpc_endpoint": "127.0.0.1:0",
            "http_endpoint": None,
            "metrics_endpoint": "127.0.0.1:0",
            "tick_interval_s": 0.1,
            "spool": {"path": str(tmp / "spool.db")},
            **serve,
        },
    }


def _send(endpoint: str, spans: list[SpanRecord]) -> None:
    exporter = OTLPSpanExporter(endpoint=endpoint, insecure=True)
    try:
        assert exporter.export(to_sdk(spans)) == SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Prometheus:
    """A real Prometheus on loopback scraping one target every second."""

    def __init__(self, tmp: Path, target: str) -> None:
        assert PROMETHEUS is not None
        config = tmp / "prometheus.yml"
        config.write_text(
            yaml.safe_dump(
                {
                    "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                    "scrape_configs": [
                        {"job_name": "spanjudge", "static_configs": [{"targets": [target]}]}
                    ],
                }
            )
        )
        self.url = f"http://127.0.0.1:{_free_port()}"
        self.log = (tmp / "prometheus.log").open("wb")
        self.proc = subprocess.Popen(
            [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp / 'tsdb'}",
             f"--web.listen-address={self.url.removeprefix('http://')}"],
            stdout=self.log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        assert wait_for(self._ready, 30), (tmp / "prometheus.log").read_text()

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/-/ready", timeout=1) as answer:
                return bool(answer.status == 200)
        except OSError:
            return False

    def query(self, expr: str) -> list[dict[str, Any]]:
        url = f"{self.url}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"
        with urllib.request.urlopen(url, timeout=5) as answer:
            body = json.load(answer)
        assert body["status"] == "success", body
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def total(self, expr: str) -> float:
        return sum(float(r["value"][1]) for r in self.query(expr))

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)
        self.log.close()


def _alert_expr(name: str) -> str:
    doc = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    for group in doc["groups"]:
        for rule in group["rules"]:
            if rule.get("alert") == name:
                return str(rule["expr"])
    raise KeyError(name)


def _skill_loaded_outcomes(
    sessions: dict[str, list[SpanRecord]], tmp: Path
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
    outcomes: dict[str, set[tuple[str, str]]] = {sid: set() for sid in sessions}
    for session in json.loads(out.stdout)["sessions"]:
        for verdict in session["verdicts"]:
            if verdict["evaluator"] == "skill_loaded":
                outcome = (verdict["outcome"], verdict["target"]["skill"])
                outcomes[session["session_id"]].add(outcome)
    return outcomes


SKILL_LOADED = 'spanjudge_verdicts_total{gen_ai_evaluation_name="skill_loaded"}'


def _run_alerts(tmp: Path, sessions: dict[str, list[SpanRecord]], rounds: int) -> Prometheus:
    """Sidecar + Prometheus; round 0 creates the counters, rounds 1.. increase them."""
    sidecar = SidecarProcess(tmp, _config(tmp)).start()
    prometheus = Prometheus(tmp, sidecar.endpoints["metrics"])
    try:
        expected = 0.0
        for run in range(rounds + 1):
            for spans in sessions.values():
                _send(sidecar.endpoints["grpc"], _copy(spans, run))
            if run == 0:
                # increase() ignores a counter's first sample: wait until Prometheus has it.
                assert wait_for(lambda: prometheus.total(SKILL_LOADED) > 0, 60)
                expected = prometheus.total(SKILL_LOADED)
        assert wait_for(lambda: prometheus.total(SKILL_LOADED) >= expected * (rounds + 1), 60)
    except BaseException:
        prometheus.stop()
        raise
    finally:
        sidecar.terminate()
    return prometheus


def test_alert_expressions_on_a_real_prometheus(tmp_path: Path) -> None:
    if PROMETHEUS is None:
        unavailable("prometheus", "prometheus is not installed (Debian package `prometheus`)")
    sessions = _sessions()
    outcomes = _skill_loaded_outcomes(sessions, tmp_path)
    failing = {sid: sessions[sid] for sid, seen in outcomes.items() if ("fail" in dict(seen))}
    healthy = {
        sid: sessions[sid]
        for sid, seen in outcomes.items()
        if seen and {o for o, _ in seen} == {"pass"}
    }
    failed_skills = {skill for seen in outcomes.values() for o, skill in seen if o == "fail"}
    assert failing and healthy and failed_skills
    load_rate = _alert_expr("SpanjudgeRequiredSkillLoadRateLow")
    assert "spanjudge_verdicts_total" in metric_names(load_rate)
    volume = (
        "sum by (gen_ai_agent_name, gen_ai_skill_name) "
        '(increase(spanjudge_verdicts_total{gen_ai_evaluation_name="skill_loaded"}[1h]))'
    )

    (tmp_path / "healthy").mkdir()
    prometheus = _run_alerts(tmp_path / "healthy", healthy, rounds=3)
    try:
        assert prometheus.total(volume) > 4  # enough verdicts for the alert to judge...
        assert prometheus.query(load_rate) == []  # ...and it stays quiet
    finally:
        prometheus.stop()

    (tmp_path / "failing").mkdir()
    prometheus = _run_alerts(tmp_path / "failing", failing, rounds=3)
    try:
        fired = prometheus.query(load_rate)
        assert fired, "a required skill that never loads must raise the alert expression"
        assert {r["metric"]["gen_ai_skill_name"] for r in fired} == failed_skills
        assert all(float(r["value"][1]) < 0.9 for r in fired)
        # The scrape carries the sidecar's self-telemetry that the other alerts read.
        assert prometheus.query("spanjudge_sidecar_spool_bytes")
        assert prometheus.query("spanjudge_spans_received_total")
    finally:
        prometheus.stop()


# --- scale-out ---


class Ring:
    """Consistent hashing in the manner of the load_balancing exporter: crc32 positions."""

    SIZE = 36_000

    def __init__(self, endpoints: list[str], points: int = 100) -> None:
        ring = sorted(
            (zlib.crc32(f"{endpoint}#{i}".encode()) % self.SIZE, endpoint)
            for endpoint in endpoints
            for i in range(points)
        )
        self._positions = [p for p, _ in ring]
        self._owners = [e for _, e in ring]

    def owner(self, key: str) -> str:
        at = bisect.bisect_left(self._positions, zlib.crc32(key.encode()) % self.SIZE)
        return self._owners[at % len(self._owners)]


def _by_trace(spans: list[SpanRecord]) -> Iterator[list[SpanRecord]]:
    groups: dict[str, list[SpanRecord]] = {}
    for span in spans:
        groups.setdefault(span.trace_id, []).append(span)
    yield from groups.values()


def _route_key(chunk: list[SpanRecord]) -> str:
    # The exporter reads the attribute from the resource, else from the chunk's first span.
    first = chunk[0]
    value = first.resource.get("session.id", first.attributes.get("session.id"))
    return "session.id=" + ("" if value is None else str(value)) + "|"


def _verdicts(server: VerdictServer) -> dict[str, tuple[Any, ...]]:
    return {
        vid: (v["session.id"], v["gen_ai.evaluation.name"], v["spanjudge.outcome"],
              v.get("gen_ai.evaluation.score.value"))
        for vid, v in server.received.verdicts().items()
    }  # fmt: skip


def _replica(tmp: Path, name: str) -> tuple[SidecarProcess, VerdictServer]:
    server = VerdictServer()
    directory = tmp / name
    directory.mkdir()
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": server.endpoint, "OTEL_EXPORTER_OTLP_INSECURE": "true"}
    return SidecarProcess(directory, _config(directory), env=env).start(), server


def _settled(servers: list[VerdictServer], sessions: int) -> bool:
    evaluated: set[str] = set()
    for server in servers:
        evaluated |= set(server.received.sessions())
    return len(evaluated) >= sessions


def test_three_replicas_routed_by_session_equal_one(tmp_path: Path) -> None:
    sessions = {f"{sid}-r1": _copy(spans, 1) for sid, spans in _sessions().items()}
    started: list[tuple[SidecarProcess, VerdictServer]] = []
    try:
        single = _replica(tmp_path, "single")
        started.append(single)
        replicas = [_replica(tmp_path, f"replica-{i}") for i in range(3)]
        started += replicas
        ring = Ring([sidecar.endpoints["grpc"] for sidecar, _ in replicas])
        routed: dict[str, set[str]] = {}
        for sid, spans in sessions.items():
            _send(single[0].endpoints["grpc"], spans)
            for chunk in _by_trace(spans):
                owner = ring.owner(_route_key(chunk))
                routed.setdefault(sid, set()).add(owner)
                _send(owner, chunk)
        assert all(len(owners) == 1 for owners in routed.values()), "a session was split"
        assert len({o for owners in routed.values() for o in owners}) > 1, "ring used one replica"

        servers = [server for _, server in replicas]
        assert wait_for(lambda: _settled([single[1]], len(sessions)), 60)
        assert wait_for(lambda: _settled(servers, len(sessions)), 60)
        time.sleep(1.5)  # an idle-timeout's worth: nothing else may arrive
        per_replica = [set(server.received.sessions()) for server in servers]
        for i, mine in enumerate(per_replica):
            for other in per_replica[i + 1 :]:
                assert not mine & other, f"evaluated twice: {mine & other}"
        # One evaluation per session, with the same revision as the single replica's.
        single_revisions = single[1].received.sessions()
        assert all(len(revs) == 1 for revs in single_revisions.values())
        for server in servers:
            for sid, revs in server.received.sessions().items():
                assert revs == single_revisions[sid], sid
        union: dict[str, tuple[Any, ...]] = {}
        for server in servers:
            union.update(_verdicts(server))
        assert union == _verdicts(single[1])
    finally:
        for sidecar, server in started:
            if sidecar.proc is not None and sidecar.proc.poll() is None:
                sidecar.terminate()
            server.stop()
