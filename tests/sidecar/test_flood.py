"""A flood of ended sessions in a few requests (four of 25,000, each session one ended span):
each evaluation process stays within its memory budget, every acknowledged session is
evaluated, and once they are, serve takes an ordinary request at once."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import grpc
import pytest

from tests.sidecar.helpers import SidecarProcess, wait_for
from tests.support.load import (
    EXPORT,
    REQUESTS,
    SESSIONS_PER_REQUEST,
    WORKERS,
    flood_config,
    flood_request,
    rss_bytes,
    verdict_server,
)

pytestmark = pytest.mark.slow

MAX_OPEN_BYTES = 64 * 1024 * 1024
# Beyond a process's share of the sessions budget: the export backlog (`max_queue_spans` items),
# the results of the batch being exported, a request being added. A flood's results and export
# items held at once are many times this.
EXPORT_ALLOWANCE = 96 * 1024 * 1024
# How long after the last verdict serve may still refuse: the time its evaluation processes'
# progress takes through the pipe (a lag estimate gone wrong refuses for minutes).
CATCH_UP_S = 5.0


@pytest.mark.timeout(1200)
def test_a_flood_of_ended_sessions_stays_within_budget_and_drains(tmp_path: Path) -> None:
    server, port, verdicts = verdict_server()  # counts: 100,000 sessions' verdicts are many
    sidecar = SidecarProcess(
        tmp_path,
        flood_config(
            tmp_path / "spool.db", f"http://127.0.0.1:{port}", max_open_bytes=MAX_OPEN_BYTES
        ),
    ).start(60)
    channel = grpc.insecure_channel(sidecar.endpoints["grpc"])
    call = channel.unary_unary(EXPORT)
    try:
        pids = sidecar.endpoints["workers"]
        assert len(pids) == WORKERS
        budget = {
            pid: rss_bytes(pid) + MAX_OPEN_BYTES // WORKERS + EXPORT_ALLOWANCE for pid in pids
        }
        peak = dict.fromkeys(pids, 0)

        def measure() -> None:
            for pid in pids:
                peak[pid] = max(peak[pid], rss_bytes(pid))

        accepted = 0
        for n in range(REQUESTS):
            body = flood_request(n * SESSIONS_PER_REQUEST, SESSIONS_PER_REQUEST)
            while True:  # as an exporter retries a retryable refusal
                measure()
                try:
                    call(body, timeout=60)
                    break
                except grpc.RpcError as exc:
                    assert exc.code() == grpc.StatusCode.UNAVAILABLE, exc
                    time.sleep(0.5)
            accepted += SESSIONS_PER_REQUEST

        def all_evaluated() -> bool:
            measure()
            return verdicts.evaluated() >= accepted

        assert wait_for(all_evaluated, 900, 0.1), (
            f"{verdicts.evaluated()} of {accepted} sessions evaluated"
        )
        over = {pid: (peak[pid], budget[pid]) for pid in pids if peak[pid] > budget[pid]}
        assert not over, f"peak RSS over budget (peak, budget) by evaluation process: {over}"
        # Once the last verdict is in, an ordinary request is taken, not refused as lagging.
        # serve hears of its evaluation processes' progress through a pipe, a moment after
        # their verdicts leave: a refusal within that moment is retried, as an exporter would.
        after = flood_request(10 * REQUESTS * SESSIONS_PER_REQUEST, 1)
        refused_until = time.monotonic() + CATCH_UP_S
        while True:
            try:
                call(after, timeout=30)
                break
            except grpc.RpcError as exc:
                assert exc.code() == grpc.StatusCode.UNAVAILABLE, exc
                assert time.monotonic() < refused_until, (
                    f"still refused {CATCH_UP_S}s after the last verdict: {exc.details()}"
                )
                time.sleep(0.2)
    finally:
        channel.close()
        sidecar.terminate(60)
        server.stop(0)


@pytest.mark.timeout(600)
def test_a_shutdown_evaluating_many_open_sessions_stays_within_budget(tmp_path: Path) -> None:
    """`on_shutdown: evaluate` with 20,000 open sessions: they are evaluated and exported a
    batch at a time within the memory budget; what the deadline leaves stays spooled, and the
    log says how many."""
    server, port, verdicts = verdict_server()
    config = flood_config(
        tmp_path / "spool.db", f"http://127.0.0.1:{port}", max_open_bytes=MAX_OPEN_BYTES
    )
    config["sessions"]["idle_timeout_s"] = 600.0
    config["serve"].update(on_shutdown="evaluate", shutdown_timeout_s=30)
    sidecar = SidecarProcess(tmp_path, config).start(60)
    sessions = 20_000
    try:
        pids = sidecar.endpoints["workers"]
        budget = {
            pid: rss_bytes(pid) + MAX_OPEN_BYTES // WORKERS + EXPORT_ALLOWANCE for pid in pids
        }
        peak = dict.fromkeys(pids, 0)
        with grpc.insecure_channel(sidecar.endpoints["grpc"]) as channel:
            call = channel.unary_unary(EXPORT)
            for first in (0, sessions // 2):
                call(flood_request(first, sessions // 2, ended=False), timeout=60)
        time.sleep(3)  # taken into the evaluation processes' stores
        assert verdicts.evaluated() == 0  # open: nothing closed them yet
        assert sidecar.proc is not None
        sidecar.proc.terminate()
        while sidecar.proc.poll() is None:
            for pid in pids:
                with contextlib.suppress(FileNotFoundError):  # it exited
                    peak[pid] = max(peak[pid], rss_bytes(pid))
            time.sleep(0.05)
        assert sidecar.proc.returncode == 0, sidecar.log.read_text()[-5000:]
        over = {pid: (peak[pid], budget[pid]) for pid in pids if peak[pid] > budget[pid]}
        assert not over, f"peak RSS over budget (peak, budget) by evaluation process: {over}"
        evaluated = verdicts.evaluated()
        assert evaluated > 0
        if evaluated < sessions:
            log = sidecar.log.read_text()
            assert "not evaluated in time" in log and "stay in the spool" in log, log[-5000:]
    finally:
        if sidecar.proc is not None and sidecar.proc.poll() is None:
            sidecar.proc.kill()
        server.stop(0)
