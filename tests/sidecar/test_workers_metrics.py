"""`serve.workers: 2` shows on /metrics what one process shows: the same families, series,
labels and values for the same sessions, though two processes judged them."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path

import pytest

from spanjudge.spans.record import SpanRecord
from tests.sidecar.helpers import SidecarProcess, VerdictServer, wait_for
from tests.sidecar.workers_helpers import _as_exported, _config, _env, _send

pytestmark = pytest.mark.slow

# Families that measure the run rather than the sessions: time taken, the serve process itself
# (target_info carries its pid; the Prometheus client's process and interpreter collectors),
# and the request path (requests, pending spans, the spool).
_RUN = re.compile(
    r"^(target_info|process_|python_|spanjudge_evaluation_duration_seconds|spanjudge_sidecar_)"
)


def _scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        return str(response.read().decode())


def _sessions(text: str) -> float:
    """Closed sessions so far (`spanjudge.sessions`, every state)."""
    return sum(float(v) for v in re.findall(r"^spanjudge_sessions_total\{.*\} (\S+)$", text, re.M))


def _open(text: str) -> float | None:
    found = re.search(r"^spanjudge_sessions_open(?:_session)?(?:\{.*\})? (\S+)$", text, re.M)
    return float(found.group(1)) if found else None


def _of_sessions(text: str) -> list[str]:
    """The exposition's lines about the sessions, sorted (series come in the order they were
    first recorded): every line but those of `_RUN`'s families (# HELP and # TYPE too)."""
    kept = []
    for line in text.splitlines():
        name = line.split(" ", 3)[2] if line.startswith("# ") else line
        if not _RUN.match(name):
            kept.append(line)
    return sorted(kept)


def _metrics(tmp: Path, workers: int, spans: list[SpanRecord]) -> list[str]:
    """/metrics of a real `spanjudge serve` with ``workers`` processes once every session of
    ``spans`` closed (idle) and was judged, and nothing moved for a while."""
    tmp.mkdir()
    verdicts = VerdictServer()
    config = _config(
        tmp,
        workers,
        sessions={"idle_timeout_s": 8, "end_grace_s": 0.2},
        metrics_endpoint="127.0.0.1:0",
    )
    sidecar = SidecarProcess(tmp, config, _env(verdicts)).start()
    try:
        url = f"http://{sidecar.endpoints['metrics']}/metrics"
        _send(sidecar.endpoints["grpc"], spans)
        assert wait_for(lambda: _sessions(_scrape(url)) > 0, 60)
        settled: list[str] = []

        def quiet() -> bool:
            text = _scrape(url)
            now = _of_sessions(text)
            done = now == settled and _open(text) == 0
            settled[:] = now
            return done

        assert wait_for(quiet, 90, interval_s=2.0)
        return settled
    finally:
        assert sidecar.terminate() == 0
        verdicts.stop()


def test_two_workers_show_the_metrics_one_worker_shows(tmp_path: Path) -> None:
    spans = _as_exported()
    one = _metrics(tmp_path / "one", 1, spans)
    two = _metrics(tmp_path / "two", 2, spans)
    # every family of the verdict and session metrics is there, with values
    for family in (
        "spanjudge_verdicts_total",
        "spanjudge_evaluator_sessions_total",
        "spanjudge_score_bucket",
        "spanjudge_session_tool_calls_bucket",
        "spanjudge_session_duration_seconds_sum",
        "spanjudge_session_retries_total",
        "spanjudge_skill_expected_total",
        "spanjudge_trajectory_measure_bucket",
        "spanjudge_label_series",
        "spanjudge_spans_received_total",
    ):
        assert any(line.startswith(family) for line in one), family
    # the same lines, but for the last digits of a histogram's sum: two processes add the
    # same values in another order
    assert [_without_sum(line) for line in two] == [_without_sum(line) for line in one]
    sums_one, sums_two = _sums(one), _sums(two)
    assert sums_two.keys() == sums_one.keys() and sums_one
    for series, value in sums_one.items():
        assert sums_two[series] == pytest.approx(value, rel=1e-12), series


def _without_sum(line: str) -> str:
    series = line.rpartition(" ")[0]
    return series if "_sum{" in series else line


def _sums(lines: list[str]) -> dict[str, float]:
    return {
        line.rpartition(" ")[0]: float(line.rpartition(" ")[2])
        for line in lines
        if "_sum{" in line and not line.startswith("#")
    }
