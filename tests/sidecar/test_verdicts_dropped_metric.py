"""A verdict the endpoint refuses as too large is dropped (no retry can help); `/metrics` says so,
as `spanjudge_verdicts_dropped_total` by signal and reason, whichever process exported it, so
that an alert can fire on it. Its series are there at zero from the start: Prometheus'
`increase()` does not count a series' first sample, so a counter born at 1 would never alert."""

from __future__ import annotations

import os
import re
import urllib.request
from pathlib import Path

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

pytestmark = pytest.mark.slow
NAME = "spanjudge_verdicts_dropped_total"

# An installed evaluator whose rationale for one session is 5 MB: its evaluation span (an event
# per verdict) and its log record are each over the 4 MiB a gRPC server takes by default.
PLUGIN = """
from spanjudge.values import Verdict


class Rambling:
    name = "rambling"

    def evaluate(self, ctx):
        rambles = ctx.trajectory.session_id == "rambles"
        return [Verdict(evaluator=self.name, outcome="pass", score=1.0, label="ok",
                        explanation="z" * 5_000_000 if rambles else "brief")]


def evaluator(options, path, problems):
    return Rambling()
"""


def _series(text: str) -> dict[tuple[str, str], float]:
    """(signal, reason) -> value of each `spanjudge_verdicts_dropped_total` series."""
    out = {}
    for labels, value in re.findall(rf"^{NAME}{{([^}}]*)}} (\S+)$", text, re.M):
        pairs = dict(re.findall(r'(\w+)="([^"]*)"', labels))
        out[(pairs["signal"], pairs["reason"])] = float(value)
    return out


@pytest.mark.parametrize("workers", [1, 2])
def test_a_verdict_refused_as_too_large_is_counted_on_metrics(tmp_path: Path, workers: int) -> None:
    site = fake_distribution(
        tmp_path / "site",
        "rambling-evaluator",
        {"spanjudge.evaluators": {"rambling": "rambling_evaluator:evaluator"}},
        {"rambling_evaluator": PLUGIN},
    )
    verdicts = VerdictServer()  # a real gRPC server: 4 MiB per message
    config = serve_config(
        tmp_path,
        sessions={"idle_timeout_s": 120.0, "end_grace_s": 0.1},
        workers=workers,
        metrics_endpoint="127.0.0.1:0",
        export={"enabled": True, "endpoint": verdicts.endpoint, "insecure": True},
    )
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    sidecar = SidecarProcess(tmp_path, config, {"PYTHONPATH": path}).start()
    try:
        url = f"http://{sidecar.endpoints['metrics']}/metrics"

        def scrape() -> dict[tuple[str, str], float]:
            with urllib.request.urlopen(url, timeout=10) as response:
                return _series(response.read().decode())

        watched = {("traces", "too_large"): 0.0, ("logs", "too_large"): 0.0}
        assert scrape() == watched  # before anything was dropped

        exporter = OTLPSpanExporter(endpoint=sidecar.endpoints["grpc"], insecure=True)
        for session in ("rambles", "after"):
            assert exporter.export(synthetic_session(session)) == SpanExportResult.SUCCESS
        exporter.shutdown()
        # The session after it is not held back by it
        assert wait_for(lambda: "after" in verdicts.received.sessions(), 60), sidecar.log
        dropped = {("traces", "too_large"): 1.0, ("logs", "too_large"): 1.0}
        assert wait_for(lambda: scrape() == dropped, 20), scrape()
        assert "rambles" not in verdicts.received.sessions()
        errors = [
            line
            for line in sidecar.log.read_text().splitlines()
            if " ERROR " in line and "too large" in line
        ]
        assert len(errors) == 2, errors
        assert all("rambles" in line and NAME in line for line in errors), errors
    finally:
        assert sidecar.terminate() == 0
        verdicts.stop()
