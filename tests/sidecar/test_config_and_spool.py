"""The `serve:` section's validation, and the spool's bookkeeping on its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from spanjudge.sessions.revisions import Completion
from spanjudge.sidecar.config import (
    DEFAULT_GRPC_ENDPOINT,
    DEFAULT_HTTP_ENDPOINT,
    DEFAULT_METRICS_ENDPOINT,
    parse_serve,
)
from spanjudge.sidecar.spool import Spool


@pytest.fixture(autouse=True)
def _no_otlp_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    ):
        monkeypatch.delenv(name, raising=False)


def test_defaults_bind_localhost_and_export_is_off_without_an_endpoint() -> None:
    problems: list[str] = []
    config = parse_serve(None, "serve", problems)
    assert not problems
    assert (config.grpc_endpoint, config.http_endpoint, config.metrics_endpoint) == (
        "127.0.0.1:4327",
        "127.0.0.1:4328",
        "127.0.0.1:9464",
    )
    assert DEFAULT_GRPC_ENDPOINT == "127.0.0.1:4327"
    assert DEFAULT_HTTP_ENDPOINT == "127.0.0.1:4328"
    assert DEFAULT_METRICS_ENDPOINT == "127.0.0.1:9464"
    assert config.export.enabled is False
    assert config.spool.enabled is True


def test_every_problem_is_reported_with_its_path() -> None:
    problems: list[str] = []
    parse_serve(
        {
            "grpc_endpoint": "nowhere",
            "spool": {"max_bytes": -1, "colour": "red"},
            "tls": {"cert_file": "/no/such.pem"},
            "export": {"protocol": "carrier-pigeon"},
            "on_shutdown": "panic",
            "bogus": 1,
        },
        "serve",
        problems,
    )
    text = "\n".join(problems)
    for needle in (
        "serve.grpc_endpoint: expected host:port",
        "serve.spool.max_bytes: expected a non-negative number",
        "serve.spool.colour: unknown setting",
        "serve.tls: cert_file and key_file go together",
        "serve.tls.cert_file: no such file",
        "serve.export.protocol: expected one of grpc, http/protobuf",
        "serve.on_shutdown: expected one of spool, evaluate",
        "serve.bogus: unknown setting",
    ):
        assert needle in text
    assert len(problems) == 8


def test_standard_otlp_environment_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    problems: list[str] = []
    config = parse_serve({}, "serve", problems)
    assert config.export.enabled is True and config.export.protocol == "http/protobuf"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
    parse_serve({}, "serve", problems)
    assert problems == [
        "env OTEL_EXPORTER_OTLP_PROTOCOL: expected one of grpc, http/protobuf, got 'http/json'"
    ]


def test_spool_releases_only_consumed_rows_of_evaluated_sessions(tmp_path: Path) -> None:
    path = str(tmp_path / "spool.db")
    spool = Spool(path, max_bytes=10_000)
    first = spool.append(b"a" * 100, "pb", ["s:one", "s:two"])
    second = spool.append(b"b" * 50, "pb", ["s:one"])
    assert spool.bytes == 150
    # session one closed after the pipeline had consumed only the first request
    spool.complete([Completion(key="one", revision=1, groups=("s:one",), upto=first)])
    assert spool.bytes == 150  # request 1 still owed to session two, request 2 not consumed
    spool.complete([Completion(key="two", revision=1, groups=("s:two",), upto=second)])
    assert spool.bytes == 50
    spool.close()
    reopened = Spool(path, max_bytes=10_000)
    stored = list(reopened.replay())
    assert [(s.request_id, s.body, s.groups) for s in stored] == [(second, b"b" * 50, {"s:one"})]
    assert reopened.revision("one") == 1 and reopened.revision("three") == 0
    assert not reopened.room_for(10_000 - 50 + 1) and reopened.room_for(100)
    reopened.close()
