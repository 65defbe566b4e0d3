"""Scale-out by session on the real Collector: `load_balancing` routing on `session.id`.

The Collector runs collector-config/scale-out.yaml with its DNS resolver swapped for a static
list of `spanjudge serve` replicas on loopback (everything else as shipped: routing key,
per-replica queue and retry). Each replica exports its verdicts to a recording OTLP server.

1. Three replicas: each session is judged by exactly one, and the union of their verdicts equals
   one replica's verdicts on the same traffic. One replica is killed (SIGKILL) mid-run and started
   again on its spool: the Collector's retry holds its data, no acknowledged session is lost.
2. A fourth replica joins while multi-turn sessions are open: sessions whose later turns move to
   it are not judged as whole there (`spanjudge.session.complete=false`, the verdicts that rest on
   the first turn `not_evaluated` with reason `prior_turns_missing`).
"""

from __future__ import annotations

import copy
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from spanjudge import reasons, semconv
from tests.collector import traffic
from tests.collector.otelcol import (
    CONFIG_DIR,
    Collector,
    loopback_env,
    otelcol_binary,
    wait_for,
    write_yaml,
)
from tests.sidecar.helpers import SidecarProcess, VerdictServer

pytestmark = pytest.mark.slow


class Replica:
    """`spanjudge serve` with its own spool, restarted on the port its first start got (the
    static resolver names it)."""

    def __init__(self, directory: Path, idle_timeout_s: float = 3.0) -> None:
        directory.mkdir(parents=True)
        self.server = VerdictServer()
        # Port 0 on the first start (no race for a port picked in advance); known after it.
        self.endpoint = ""
        self.config = traffic.serve_config(
            directory, grpc_endpoint="127.0.0.1:0", idle_timeout_s=idle_timeout_s
        )
        env = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": self.server.endpoint,
            "OTEL_EXPORTER_OTLP_INSECURE": "true",
        }
        self.sidecar = SidecarProcess(directory, self.config, env=env)

    def start(self) -> Replica:
        self.sidecar.start()
        if not self.endpoint:
            # The port the static resolver names: a restart must come back on it.
            self.endpoint = str(self.sidecar.endpoints["grpc"])
            self.config["serve"]["grpc_endpoint"] = self.endpoint
            self.sidecar.config_path.write_text(yaml.safe_dump(self.config), encoding="utf-8")
        return self

    def metric(self, name: str) -> float:
        """Sum of a metric's series on the replica's own /metrics."""
        url = f"http://{self.sidecar.endpoints['metrics']}/metrics"
        with urllib.request.urlopen(url, timeout=5) as answer:
            text = answer.read().decode()
        found = re.findall(rf"^{name}(?:\{{[^}}]*\}})? (\S+)$", text, re.M)
        return sum(float(v) for v in found)

    def spans_received(self) -> float:
        return self.metric("spanjudge_spans_received_total")

    def idle(self) -> bool:
        """Nothing open, and every closed session's verdicts arrived at the recording server.

        Counts revisions: a session closed on its idle timeout and re-opened by a late turn
        (a loaded machine) is closed twice and evaluated twice."""
        closed = self.metric("spanjudge_sessions_total")
        evaluated = sum(len(revisions) for revisions in self.sessions().values())
        return self.metric("spanjudge_sessions_open") == 0 and evaluated >= closed

    def sessions(self) -> dict[str, set[int]]:
        return self.server.received.sessions()

    def stop(self) -> None:
        proc = self.sidecar.proc
        if proc is not None and proc.poll() is None:
            self.sidecar.terminate()
        self.server.stop()


def _balancer_config(directory: Path, replicas: list[Replica]) -> Path:
    """scale-out.yaml as shipped, with a static resolver and the backends' pipelines left out
    (these tests read verdicts from each replica's recording server)."""
    doc = yaml.safe_load((CONFIG_DIR / "scale-out.yaml").read_text(encoding="utf-8"))
    doc = copy.deepcopy(doc)
    balancer = doc["exporters"]["load_balancing/spanjudge"]
    balancer["resolver"] = {"static": {"hostnames": [r.endpoint for r in replicas]}}
    pipes = doc["service"]["pipelines"]
    pipes["traces/agents"]["exporters"] = ["load_balancing/spanjudge"]
    for name in [n for n in pipes if n != "traces/agents"]:
        del pipes[name]
    for name in ("otlp_grpc/tempo", "otlp_http/loki", "prometheus_remote_write"):
        del doc["exporters"][name]
    del doc["receivers"]["otlp/spanjudge_verdicts"]
    return write_yaml(directory / f"scale-out-{len(replicas)}.yaml", doc)


@pytest.fixture
def started(tmp_path: Path) -> Iterator[list[Any]]:
    otelcol_binary()
    parts: list[Any] = []
    yield parts
    for part in reversed(parts):
        part.stop()


def _evaluated(replicas: list[Replica]) -> set[str]:
    return {sid for r in replicas for sid in r.sessions()}


def test_three_replicas_equal_one_and_a_killed_replica_loses_nothing(
    tmp_path: Path, started: list[Any]
) -> None:
    fixture = traffic.sessions()
    # Before the kill: one run of the fixture's sessions; while the victim is down: two more
    # (32 sessions, so the victim owns some of them but for a (2/3)**32 chance).
    runs = [{f"{sid}-r{run}": traffic.copy(spans, run) for sid, spans in fixture.items()
             for run in group} for group in ((1,), (2, 3))]  # fmt: skip
    everything = runs[0] | runs[1]

    single = Replica(tmp_path / "single").start()
    started.append(single)
    replicas = [Replica(tmp_path / f"replica-{i}").start() for i in range(3)]
    started.extend(replicas)
    env = loopback_env()
    collector = Collector(tmp_path / "collector", _balancer_config(tmp_path, replicas), env)
    started.append(collector.start())
    agent = env["AGENTS_OTLP_GRPC_ENDPOINT"]

    for spans in everything.values():
        traffic.send(single.endpoint, spans)
    # First half; then the busiest replica dies with sessions open (idle timeout 3 s).
    for spans in runs[0].values():
        traffic.send(agent, spans)
    assert wait_for(lambda: sum(r.spans_received() for r in replicas) > 0, 30)
    victim = max(replicas, key=Replica.spans_received)
    victim.sidecar.kill9()
    for spans in runs[1].values():
        traffic.send(agent, spans)  # acknowledged by the Collector while the victim is down

    def retrying() -> bool:
        # The Collector's own account: a send to the dead replica failed and is queued for retry.
        log = collector.log_path.read_text(encoding="utf-8", errors="replace")
        return any(
            "Will retry" in line and f'"endpoint": "{victim.endpoint}"' in line
            for line in log.splitlines()
        )

    assert wait_for(retrying, 30), collector.log()
    victim.start()  # same port, same spool

    assert wait_for(lambda: _evaluated([single]) >= set(everything), 90)
    assert wait_for(lambda: _evaluated(replicas) >= set(everything), 120), (
        set(everything) - _evaluated(replicas),
        collector.log(),
    )
    per_replica = [set(r.sessions()) for r in replicas]
    assert all(per_replica), f"a replica got no session: {per_replica}"
    for i, mine in enumerate(per_replica):
        for other in per_replica[i + 1 :]:
            assert not mine & other, f"judged by two replicas: {mine & other}"
    # The victim judged sessions of both halves: what reached it while it was down was held.
    assert set(victim.sessions()) & set(runs[1])
    union: dict[str, tuple[Any, ...]] = {}
    for replica in replicas:
        union.update(traffic.verdicts(replica.server))
    assert union == traffic.verdicts(single.server)


def test_a_replica_added_mid_session_does_not_judge_later_turns_as_whole(
    tmp_path: Path, started: list[Any]
) -> None:
    multi = traffic.sessions()["strands-default-multi-turn"]
    # Enough sessions that some move when the ring grows from 3 to 4 (about a quarter do).
    sessions = {
        f"strands-default-multi-turn-r{run}": traffic.copy(multi, run) for run in range(1, 41)
    }
    # Long idle timeout: every session is still open on its first owner when the ring changes.
    replicas = [Replica(tmp_path / f"replica-{i}", idle_timeout_s=8.0).start() for i in range(4)]
    started.extend(replicas)
    env = loopback_env()
    three = Collector(tmp_path / "three", _balancer_config(tmp_path, replicas[:3]), env)
    started.append(three.start())
    agent = env["AGENTS_OTLP_GRPC_ENDPOINT"]
    turns = {sid: traffic.by_trace(spans) for sid, spans in sessions.items()}
    assert all(len(t) == 3 for t in turns.values())
    first_turn_spans = sum(len(t[0]) for t in turns.values())
    for session_turns in turns.values():
        traffic.send(agent, session_turns[0])
    assert wait_for(lambda: sum(r.spans_received() for r in replicas[:3]) >= first_turn_spans, 30)
    # The operator adds a replica to the static list and restarts the Collector.
    assert three.stop() == 0
    started.remove(three)
    four = Collector(tmp_path / "four", _balancer_config(tmp_path, replicas), env)
    started.append(four.start())
    for session_turns in turns.values():
        for turn in session_turns[1:]:
            traffic.send(agent, turn)

    newcomer = replicas[3]
    total = sum(len(spans) for spans in sessions.values())
    assert wait_for(lambda: sum(r.spans_received() for r in replicas) >= total, 60)
    assert wait_for(lambda: all(r.idle() for r in replicas), 60)
    moved = set(newcomer.sessions())
    assert moved and moved < set(sessions)

    for span in newcomer.server.received.eval_spans:
        # Later turns only: marked incomplete, and the skill (loaded in turn 1) is not "missing".
        assert span["attrs"][semconv.SJ_SESSION_COMPLETE] is False, span["attrs"]
    loaded = [
        v
        for v in newcomer.server.received.verdicts().values()
        if v["gen_ai.evaluation.name"] == reasons.SKILL_LOADED
    ]
    # The expectations require csv-report for every moved session: one verdict each at least
    # (so the checks below are not vacuous); without the continuity check each reads "fail".
    assert {v["session.id"] for v in loaded} == moved
    for verdict in loaded:
        assert verdict["spanjudge.outcome"] == "not_evaluated", verdict
        assert verdict.get("spanjudge.reason") == reasons.PRIOR_TURNS_MISSING, verdict
    # The old owners judged the first turns of the moved sessions (the skill loads there) and
    # the unmoved sessions whole; none of them reads "skill never loaded".
    for replica in replicas[:3]:
        for verdict in replica.server.received.verdicts().values():
            if verdict["gen_ai.evaluation.name"] == reasons.SKILL_LOADED:
                assert verdict["spanjudge.outcome"] == "pass", verdict
    unmoved = set(sessions) - moved
    assert unmoved and unmoved <= _evaluated(replicas[:3])
