"""`serve.workers: 2` (evaluation in spawned processes): a `SystemExit`
or another `BaseException` from a plugin evaluator is an error verdict and the processes live
on; a session a plugin sink failed on in an evaluation process stays spooled and is judged at
the next start, once per revision, with the same verdict ids."""

from __future__ import annotations

import os
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from tests.conftest import fake_distribution
from tests.sidecar.helpers import (
    SidecarProcess,
    VerdictServer,
    serve_config,
    synthetic_session,
    wait_for,
)
from tests.sidecar.workers_helpers import _alive

pytestmark = pytest.mark.slow

PLUGIN = """
import os
import time
from spanjudge.values import Verdict


class Boom(BaseException):
    pass


class Raiser:
    name = "raiser"

    def evaluate(self, ctx):
        sid = ctx.trajectory.session_id
        if sid == "exits":
            raise SystemExit(3)
        if sid == "slow" and os.environ.get("PLUGIN_SLOW"):
            time.sleep(120)
        if sid == "booms":
            raise Boom("not an Exception")
        return [Verdict(evaluator=self.name, outcome="pass", score=1.0, label="ok",
                        explanation="ok")]


def evaluator(options, path, problems):
    return Raiser()


class Failing:
    def emit(self, result):
        if os.environ.get("PLUGIN_SINK_FAILS") and result.trajectory.session_id == "breaks":
            raise RuntimeError("sink down for this one")

    def flush(self, timeout_s):
        return True

    def shutdown(self):
        pass


def sink(options, path, problems):
    return Failing()
"""


def _config(tmp: Path, **serve: Any) -> dict[str, Any]:
    config = serve_config(
        tmp,
        sessions={"idle_timeout_s": 120.0, "end_grace_s": 0.1},
        workers=2,
        **{"http_endpoint": "127.0.0.1:0", **serve},
    )
    return {**config, "emit": {"sinks": {"plugin_sink": {}}}}


def _env(tmp: Path, verdicts: VerdictServer, **extra: str) -> dict[str, str]:
    site = fake_distribution(
        tmp / "site",
        "workers-plugins",
        {
            "spanjudge.evaluators": {"raiser": "workers_plugin:evaluator"},
            "spanjudge.sinks": {"plugin_sink": "workers_plugin:sink"},
        },
        {"workers_plugin": PLUGIN},
    )
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    return {
        "PYTHONPATH": path,
        "OTEL_EXPORTER_OTLP_ENDPOINT": verdicts.endpoint,
        "OTEL_EXPORTER_OTLP_INSECURE": "true",
        "SPANJUDGE_RAISE_INTERNAL_ERRORS": "0",  # contained, as in production
        **extra,
    }


def _healthz(sidecar: SidecarProcess) -> int:
    try:
        with urllib.request.urlopen(f"http://{sidecar.endpoints['http']}/healthz", timeout=5) as r:
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def _send(sidecar: SidecarProcess, *sessions: str) -> None:
    exporter = OTLPSpanExporter(endpoint=sidecar.endpoints["grpc"], insecure=True)
    for session in sessions:
        assert exporter.export(synthetic_session(session)) == SpanExportResult.SUCCESS
    exporter.shutdown()


def test_base_exceptions_from_an_evaluator_in_an_evaluation_process(tmp_path: Path) -> None:
    verdicts = VerdictServer()
    sidecar = SidecarProcess(tmp_path, _config(tmp_path), _env(tmp_path, verdicts)).start()
    try:
        assert len(sidecar.endpoints["workers"]) == 2
        sent = ["exits", "booms", *(f"fine-{i}" for i in range(8))]
        _send(sidecar, *sent)
        assert wait_for(lambda: set(sent) <= set(verdicts.received.sessions()), 30)
        errors = {
            e["session.id"]: e.get("error.type")
            for e in verdicts.received.verdicts().values()
            if e["gen_ai.evaluation.name"] == "raiser"
        }
        assert errors["exits"] == "SystemExit"
        assert errors["booms"] == "Boom"
        assert {errors[f"fine-{i}"] for i in range(8)} == {None}
        assert _healthz(sidecar) == 200
        _send(sidecar, "after")  # both processes still judge
        assert wait_for(lambda: "after" in verdicts.received.sessions(), 30)
    finally:
        assert sidecar.terminate() == 0
        verdicts.stop()
    assert "stopped:" not in sidecar.log.read_text()


def test_a_session_a_plugin_sink_failed_on_stays_spooled(tmp_path: Path) -> None:
    verdicts = VerdictServer()
    env = _env(tmp_path, verdicts, PLUGIN_SINK_FAILS="1")
    sidecar = SidecarProcess(tmp_path, _config(tmp_path), env).start()
    sent = ["breaks", *(f"fine-{i}" for i in range(6))]
    try:
        _send(sidecar, *sent)
        assert wait_for(lambda: set(sent) <= set(verdicts.received.sessions()), 30)
    finally:
        assert sidecar.terminate() == 0
    first = dict(verdicts.received.verdicts())
    # the sink is back: the next start judges "breaks" again, the others are done
    again = SidecarProcess(tmp_path, _config(tmp_path), _env(tmp_path, verdicts)).start()
    try:
        assert wait_for(lambda: len(verdicts.received.eval_spans) > len(sent), 30)
    finally:
        assert again.terminate() == 0
        verdicts.stop()
    judged = [s["attrs"]["session.id"] for s in verdicts.received.eval_spans]
    assert sorted(judged) == sorted([*sent, "breaks"])
    assert verdicts.received.verdicts().keys() == first.keys()  # same ids: the re-send dedupes


@pytest.mark.parametrize("on_shutdown", ["spool", "evaluate"])
def test_a_shutdown_that_times_out_in_an_evaluation_process(
    tmp_path: Path, on_shutdown: str
) -> None:
    verdicts = VerdictServer()
    config = _config(tmp_path, shutdown_timeout_s=4, on_shutdown=on_shutdown)
    env = _env(tmp_path, verdicts, PLUGIN_SLOW="1")
    sidecar = SidecarProcess(tmp_path, config, env).start()
    sent = ["slow", *(f"fine-{i}" for i in range(6))]
    try:
        _send(sidecar, *sent[1:])
        assert wait_for(lambda: set(sent[1:]) <= set(verdicts.received.sessions()), 30)
        _send(sidecar, "slow")  # its process is stuck in the evaluator from now on
        time.sleep(1.0)
        started = time.monotonic()
        assert sidecar.terminate(timeout_s=30) == 0
        assert time.monotonic() - started < 10  # the deadline, not the evaluator, ended it
        assert "slow" not in verdicts.received.sessions()
        assert not any(_alive(pid) for pid in sidecar.endpoints["workers"])
        # the next start (the evaluator fast again) judges it, and nothing else again
        again = SidecarProcess(tmp_path, config, _env(tmp_path, verdicts)).start()
        try:
            assert wait_for(lambda: "slow" in verdicts.received.sessions(), 30)
        finally:
            assert again.terminate() == 0
    finally:
        if sidecar.proc is not None and sidecar.proc.poll() is None:
            sidecar.kill9()
        verdicts.stop()
    judged = sorted(s["attrs"]["session.id"] for s in verdicts.received.eval_spans)
    assert judged == sorted(sent)
