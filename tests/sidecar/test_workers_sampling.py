"""A sample in `spanjudge serve` with two evaluation processes keeps the sessions an offline
`spanjudge eval` of the same spans keeps: the choice rests on the session id alone."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from spanjudge.config import parse_config
from spanjudge.emit.collecting import CollectingSink
from spanjudge.engine import Engine
from spanjudge.offline import run_offline
from spanjudge.sidecar.routing import owner
from tests.sidecar.helpers import SidecarProcess
from tests.sidecar.workers_helpers import MIXED, _as_exported, _config, _env, _Receiver, _send

pytestmark = pytest.mark.slow
EVALUATORS = {"skill_loaded": {"sample": 0.3}}


def test_two_workers_sample_the_sessions_an_offline_run_samples(tmp_path: Path) -> None:
    sink = CollectingSink()
    run_offline([str(p) for p in MIXED], Engine(parse_config({"evaluators": EVALUATORS})), sink)
    offline_out = {
        sid
        for sid, result in sink.by_session().items()
        for v in result.verdicts
        if v.evaluator == "skill_loaded" and v.reason == "not_sampled"
    }
    sessions = set(sink.by_session())
    assert 0 < len(offline_out) < len(sessions)

    verdicts = _Receiver()
    config = {**_config(tmp_path, 2, on_shutdown="evaluate"), "evaluators": EVALUATORS}
    sidecar = SidecarProcess(tmp_path, config, _env(verdicts))
    sidecar.start()
    try:
        _send(sidecar.endpoints["grpc"], _as_exported())
        assert sidecar.terminate() == 0  # on_shutdown evaluate: every session is judged now
    finally:
        if sidecar.proc is not None and sidecar.proc.poll() is None:
            sidecar.kill9()
    time.sleep(0.5)
    verdicts.stop()
    served = verdicts.received.verdicts().values()
    judged = {v["session.id"] for v in served}
    assert judged == sessions
    served_out = {
        v["session.id"]
        for v in served
        if v["gen_ai.evaluation.name"] == "skill_loaded"
        and v.get("spanjudge.reason") == "not_sampled"
    }
    assert served_out == offline_out
    # each process judged some of its sessions and left others out (sessions go to the process
    # their key hashes to), so the two agreed with the offline run, not one of them alone
    for process in range(2):
        mine = {sid for sid in sessions if owner(sid, 2) == process}
        assert mine & offline_out and mine - offline_out, process
    # the not_sampled verdicts reached the metrics with their reason, beside the others
    counted = sum(
        value
        for (name, attrs), value in verdicts.counters.values.items()
        if name == "spanjudge.verdicts"
        and ("gen_ai.evaluation.name", "skill_loaded") in attrs
        and ("spanjudge.reason", "not_sampled") in attrs
    )
    assert counted == len(offline_out)
