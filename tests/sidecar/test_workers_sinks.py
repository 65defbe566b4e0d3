"""With `serve.workers` > 1 the serve process's metrics are what they are with 1: a session
whose metrics could not be recorded stays spooled and is judged again at the next start, and
the LLM judges' call and token counters, counted in the evaluation processes, reach serve's
metric export."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from spanjudge.emit.metrics import MetricsSink, MetricsTally
from spanjudge.spans.files import read_input
from tests.judges.chat_server import chat_server, completion
from tests.sidecar.conftest import MakeSidecar
from tests.sidecar.helpers import (
    FIXTURES,
    SidecarProcess,
    synthetic_session,
    to_sdk,
    wait_for,
)
from tests.sidecar.workers_helpers import _config, _env, _Receiver

STRANDS = FIXTURES / "strands" / "strands_default.jsonl"

pytestmark = pytest.mark.slow


def _send(port: int, *sessions: tuple[str, str]) -> None:
    """Send each (session id, agent name)."""
    exporter = OTLPSpanExporter(endpoint=f"127.0.0.1:{port}", insecure=True, timeout=20)
    for session, agent in sessions:
        spans = synthetic_session(session, agent=agent)
        assert exporter.export(spans) == SpanExportResult.SUCCESS
    exporter.shutdown()


@pytest.mark.usefixtures("contained_errors")  # fails on purpose
@pytest.mark.parametrize("workers", [1, 2])
def test_a_session_the_metrics_sink_failed_on_stays_spooled(
    make_sidecar: MakeSidecar, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, workers: int
) -> None:
    # The sink fails on the sessions of one agent. With one process it is given each session;
    # with two it is given what a process tallied of the sessions it judged since its last flush.
    broken = {"broken-agent"}
    failed: list[str] = []
    if workers == 1:
        original = MetricsSink.emit

        def emit(self: MetricsSink, result: Any) -> None:
            if result.trajectory.agent_name in broken:
                failed.append(result.trajectory.session_id)
                raise RuntimeError("metrics sink bug")
            original(self, result)

        monkeypatch.setattr(MetricsSink, "emit", emit)
    else:
        replay = MetricsSink.replay

        def replay_tally(self: MetricsSink, tally: MetricsTally) -> None:
            if any(raw in broken for _, raw in tally.labels):
                failed.append("a tally")
                raise RuntimeError("metrics sink bug")
            replay(self, tally)

        monkeypatch.setattr(MetricsSink, "replay", replay_tally)
    spool = {"path": str(tmp_path / "kept.db")}
    sidecar = make_sidecar(workers=workers, spool=spool)
    assert sidecar.grpc is not None
    _send(sidecar.grpc.port, ("breaks", "broken-agent"))
    assert wait_for(lambda: bool(failed), 30)
    _send(sidecar.grpc.port, ("fine", "bench-agent"))
    assert wait_for(lambda: sidecar.worker.evaluated_sessions >= 1, 30)
    assert wait_for(lambda: sidecar.spool.requests <= 1, 10)
    assert sidecar.worker.evaluated_sessions == 1  # "fine" only
    # not recorded as evaluated: its request is still in the spool for the next start
    assert sidecar.spool.revision("fine") == 1
    assert sidecar.spool.revision("breaks") == 0
    assert sidecar.spool.requests == 1
    sidecar.stop()
    broken.clear()  # the fault gone, the next start judges it, once
    again = make_sidecar(workers=workers, spool=spool)
    assert wait_for(lambda: again.worker.evaluated_sessions == 1, 30)
    assert wait_for(lambda: again.spool.requests == 0, 10)
    assert again.spool.revision("breaks") == 1
    assert again.spool.revision("fine") == 1


def _judged_run(tmp: Path, workers: int, base_url: str) -> dict[Any, float]:
    """The strands fixture through a real `spanjudge serve` whose skill selection asks an
    OpenAI-compatible judge; the judge counters its metric export delivered."""
    tmp.mkdir()
    receiver = _Receiver()
    config = _config(tmp, workers, on_shutdown="evaluate")
    config["judges"] = {
        "local": {"type": "openai", "base_url": base_url, "model": "scripted", "max_retries": 0}
    }
    config["evaluators"] = {"skill_selection": {"judge": "local"}}
    sidecar = SidecarProcess(tmp, config, _env(receiver)).start()
    try:
        exporter = OTLPSpanExporter(endpoint=sidecar.endpoints["grpc"], insecure=True)
        spans = [s for chunk in read_input(str(STRANDS)) for s in chunk.spans]
        for i in range(0, len(spans), 5):
            assert exporter.export(to_sdk(spans[i : i + 5])) == SpanExportResult.SUCCESS
        exporter.shutdown()
        assert sidecar.terminate() == 0  # on_shutdown evaluate: every session judged now
    finally:
        if sidecar.proc is not None and sidecar.proc.poll() is None:
            sidecar.kill9()
        receiver.stop()
    return {k: v for k, v in receiver.counters.values.items() if k[0].startswith("spanjudge.judge")}


def _by(counters: dict[Any, float], name: str, attribute: str) -> dict[Any, float]:
    out: dict[Any, float] = {}
    for (metric, attributes), value in counters.items():
        if metric == name:
            label = dict(attributes)[attribute]
            out[label] = out.get(label, 0) + value
    return out


def test_judge_call_and_token_metrics_reach_the_serve_process(tmp_path: Path) -> None:
    answer = json.dumps({"rating": "yes", "rationale": "the skill fits the request"})
    with chat_server(*[completion(answer, 120, 30)] * 400) as server:
        one = _judged_run(tmp_path / "one", 1, server.base_url)
        asked_one = len(server.requests)
        two = _judged_run(tmp_path / "two", 2, server.base_url)
        asked_two = len(server.requests) - asked_one
    assert asked_one > 0 and asked_two > 0
    for counters, asked in ((one, asked_one), (two, asked_two)):
        calls = _by(counters, "spanjudge.judge.calls", "outcome")
        assert calls["ok"] == asked  # every request the endpoint answered, counted
        tokens = _by(counters, "spanjudge.judge.tokens", "gen_ai.token.type")
        assert tokens == {"input": 120 * asked, "output": 30 * asked}
    # as many judgements asked for; each process has its own cache, so a request repeated in
    # sessions that two processes own is sent twice (README)
    assert sum(_by(two, "spanjudge.judge.calls", "outcome").values()) == sum(
        _by(one, "spanjudge.judge.calls", "outcome").values()
    )
