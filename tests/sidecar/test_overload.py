"""A spool small enough to fill: clients get retryable errors, retry, and nothing is lost."""

from __future__ import annotations

import threading

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from tests.sidecar.conftest import MakeSidecar
from tests.sidecar.helpers import VerdictServer, synthetic_session, wait_for

pytestmark = pytest.mark.slow
PER_CLIENT = 6


def test_full_spool_pushes_back_and_loses_nothing(make_sidecar: MakeSidecar) -> None:
    verdicts = VerdictServer()
    sidecar = None
    try:
        sidecar = make_sidecar(
            sessions={"idle_timeout_s": 60, "end_grace_s": 0.3},
            spool={"max_bytes": 4000},
            export={"enabled": True, "endpoint": verdicts.endpoint, "insecure": True},
        )
        assert sidecar.grpc is not None and sidecar.http is not None
        exporters = [
            GrpcExporter(endpoint=f"127.0.0.1:{sidecar.grpc.port}", insecure=True, timeout=60),
            GrpcExporter(endpoint=f"127.0.0.1:{sidecar.grpc.port}", insecure=True, timeout=60),
            HttpExporter(endpoint=f"http://127.0.0.1:{sidecar.http.port}/v1/traces", timeout=60),
        ]
        results: list[tuple[str, SpanExportResult]] = []

        def client(index: int) -> None:
            for i in range(PER_CLIENT):
                session_id = f"load-{index}-{i}"
                spans = synthetic_session(session_id, tools=4)
                results.append((session_id, exporters[index].export(spans)))

        threads = [threading.Thread(target=client, args=(i,)) for i in range(len(exporters))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(180)
        sent = {session_id for session_id, _ in results}
        assert len(sent) == PER_CLIENT * len(exporters)
        assert all(result == SpanExportResult.SUCCESS for _, result in results)
        # the spool did fill, and the clients were told to come back
        assert sidecar.handler.counts.get("unavailable", 0) > 0
        assert wait_for(lambda: set(verdicts.received.sessions()) >= sent, 30)
        assert all(r == {1} for r in verdicts.received.sessions().values())
        assert wait_for(lambda: sidecar.spool.bytes == 0)
    finally:
        # The sidecar first: stopped after its verdict endpoint, it would retry exports to it
        # until its shutdown budget ran out.
        if sidecar is not None:
            sidecar.stop()
        verdicts.stop()
