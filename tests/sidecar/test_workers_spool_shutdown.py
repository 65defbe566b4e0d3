"""`serve.workers` > 1: a SIGTERM in `on_shutdown: spool` mode keeps what
is open (and what waits out its end grace) spooled, and a restart with another number of
processes judges each session once, with the verdicts one process gives."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.sidecar.helpers import SidecarProcess
from tests.sidecar.workers_helpers import (
    _as_exported,
    _config,
    _env,
    _Receiver,
    _send,
    _stop,
    _verdicts,
)

pytestmark = pytest.mark.slow


def _shutdown_config(tmp: Path, workers: int, on_shutdown: str) -> dict[str, Any]:
    # ended sessions close during the run; the rest are open at the SIGTERM
    sessions = {"idle_timeout_s": 300.0, "end_grace_s": 0.2}
    return _config(tmp, workers, sessions=sessions, http_endpoint=None, on_shutdown=on_shutdown)


def _run(tmp: Path, before: int, after: int, reference_sessions: set[str]) -> _Receiver:
    tmp.mkdir()
    verdicts = _Receiver()
    first: SidecarProcess | None = None
    second: SidecarProcess | None = None
    try:
        mode = "evaluate" if before == after == 1 else "spool"
        first = SidecarProcess(tmp, _shutdown_config(tmp, before, mode), _env(verdicts)).start()
        _send(first.endpoints["grpc"], _as_exported())
        assert first.terminate() == 0
        if mode == "spool":
            # something was left open for the restart, and something was judged before it
            judged = set(verdicts.received.sessions())
            assert 0 < len(judged) < len(reference_sessions), len(judged)
            second = SidecarProcess(
                tmp, _shutdown_config(tmp, after, "evaluate"), _env(verdicts)
            ).start()
            assert second.terminate() == 0
    finally:
        _stop(first, second)
        verdicts.stop()
    return verdicts


@pytest.fixture(scope="module")
def one_process(tmp_path_factory: pytest.TempPathFactory) -> _Receiver:
    """What one process, stopped with `on_shutdown: evaluate`, exports (the same reference for
    every number of processes: run once)."""
    return _run(tmp_path_factory.mktemp("spool-shutdown") / "reference", 1, 1, set())


@pytest.mark.parametrize(("before", "after"), [(2, 1), (2, 3)])
def test_sigterm_in_spool_mode_then_restart_with_another_n_judges_each_session_once(
    tmp_path: Path, before: int, after: int, one_process: _Receiver
) -> None:
    first = one_process
    reference = _verdicts(first)
    assert len(reference) > 100
    changed = _run(tmp_path / "changed", before, after, set(first.received.sessions()))
    assert all(len(revisions) == 1 for revisions in changed.received.sessions().values()), (
        changed.received.sessions()
    )
    assert changed.received.log_ids() == changed.received.span_ids()
    assert _verdicts(changed) == reference
