"""`configure_opentelemetry`: the standard OTEL_* variables decide the exporters, a bad value is
a configuration error before anything starts, and OTLP with no endpoint is said out loud."""

from __future__ import annotations

import logging

import pytest

from spanjudge import ConfigError, configure_opentelemetry


@pytest.fixture(autouse=True)
def _clean_otel_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)


def test_otlp_chosen_without_an_endpoint_is_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    for signal in ("TRACES", "METRICS", "LOGS"):
        monkeypatch.setenv(f"OTEL_{signal}_EXPORTER", "otlp")
    with caplog.at_level(logging.WARNING, logger="spanjudge"):
        otel = configure_opentelemetry(None, set_global=False)
        otel.shutdown()
    [record] = [r for r in caplog.records if "OTEL_EXPORTER_OTLP_ENDPOINT" in r.getMessage()]
    assert "traces, metrics, logs go to the OTLP default" in record.getMessage()


def test_none_exporters_export_nothing_and_say_nothing(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    for signal in ("TRACES", "METRICS", "LOGS"):
        monkeypatch.setenv(f"OTEL_{signal}_EXPORTER", "none")
    with caplog.at_level(logging.WARNING, logger="spanjudge"):
        otel = configure_opentelemetry(None, set_global=False)
        otel.shutdown()
    assert not [r for r in caplog.records if "OTEL_EXPORTER_OTLP_ENDPOINT" in r.getMessage()]


@pytest.mark.parametrize(
    ("name", "value"),
    [("OTEL_TRACES_EXPORTER", "jaeger"), ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")],
)
def test_a_bad_variable_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as info:
        configure_opentelemetry(None, set_global=False)
    assert f"env {name}: expected one of" in str(info.value) and repr(value) in str(info.value)
