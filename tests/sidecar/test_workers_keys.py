"""Session keys that are not the plain `session.id` on every span (a copy under the tracer's
own namespace, on some spans only): `serve` with two
evaluation processes, sent the spans as an SDK exports them (a trace in several requests, its
root last), puts every span in the session `spanjudge eval` puts it in, and those are the
sessions the generator ran."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from spanjudge.spans.files import read_input
from spanjudge.spans.record import SpanRecord
from tests.sidecar.helpers import FIXTURES, SidecarProcess, wait_for
from tests.sidecar.workers_helpers import _config, _env, _Receiver, _send, _verdicts

pytestmark = pytest.mark.slow

KEYED = [FIXTURES / "mirascope" / "mirascope.jsonl"]
Verdicts = list[tuple[Any, ...]]


def _as_exported() -> list[SpanRecord]:
    spans = [s for path in KEYED for chunk in read_input(str(path)) for s in chunk.spans]
    return sorted(spans, key=lambda s: s.end_unix_nano)


def _scenario_sessions() -> set[str]:
    return {
        record["session_id"]
        for path in KEYED
        for record in json.loads((path.parent / "scenarios.json").read_text())["sessions"]
    }


def _eval(path: Path, config: Path) -> Verdicts:
    """(session, revision, evaluator, outcome, score, label) of `spanjudge eval --format json`."""
    command = ["eval", str(path), "--config", str(config), "--format", "json"]
    out = subprocess.run(
        [sys.executable, "-m", "spanjudge.cli", *command],
        capture_output=True,
        check=False,
    )
    assert out.returncode in (0, 1), out.stderr.decode()
    return [
        (s["session_id"], s["revision"], v["evaluator"], v["outcome"], v["score"], v["label"])
        for s in json.loads(out.stdout)["sessions"]
        for v in s["verdicts"]
    ]


def test_two_workers_key_sessions_as_eval_does(tmp_path: Path) -> None:
    # one evaluation per session, when it has been idle a while (long enough that a loaded
    # machine never splits a session between two exports): its verdicts are eval's
    sessions = {"idle_timeout_s": 3.0, "mode": "session"}
    verdicts = _Receiver()
    sidecar = SidecarProcess(tmp_path, _config(tmp_path, 2, sessions=sessions), _env(verdicts))
    sidecar.start()
    try:
        _send(sidecar.endpoints["grpc"], _as_exported())
        offline = [v for path in KEYED for v in _eval(path, sidecar.config_path)]
        assert {v[0] for v in offline} == _scenario_sessions()
        assert wait_for(lambda: len(_verdicts(verdicts)) >= len(offline), 60)
        time.sleep(0.5)  # nothing more comes
        assert sidecar.terminate() == 0
    finally:
        if sidecar.proc is not None and sidecar.proc.poll() is None:
            sidecar.kill9()
        verdicts.stop()
    assert sorted(_verdicts(verdicts).values(), key=repr) == sorted(offline, key=repr)
