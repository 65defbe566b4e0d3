"""Collector-style values where Collector users meet spanjudge's configuration: durations such as
`15m`, `30s`, `500ms` beside the `_s` numbers, and `tls:` blocks with the Collector's keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from spanjudge.config import parse_config
from spanjudge.config_values import parse_duration_s
from spanjudge.errors import ConfigError
from spanjudge.sidecar import serve_config


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("15m", 900.0), ("30s", 30.0), ("500ms", 0.5), ("1h30m", 5400.0), ("1.5h", 5400.0),
     ("0", 0.0), ("250us", 0.00025), ("2h45m30s", 9930.0)],
)  # fmt: skip
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_duration_s(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["15", "15 minutes", "m", "1d", "-5s", "", "5s3"])
def test_what_is_not_a_duration(text: str) -> None:
    assert parse_duration_s(text) is None


def test_session_durations_in_either_spelling() -> None:
    config = parse_config(
        {
            "sessions": {
                "idle_timeout": "15m",
                "max_age_s": "6h",
                "end_grace_s": 2,
                "turn_grace": "500ms",
            }
        }
    )
    policy = config.policy
    assert (policy.idle_timeout_s, policy.max_age_s) == (900.0, 21600.0)
    assert (policy.end_grace_s, policy.turn_grace_s) == (2.0, 0.5)


def test_a_bad_duration_names_the_setting_and_the_spellings() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"sessions": {"idle_timeout": "15 minutes", "max_age": "1h", "max_age_s": 60}})
    problems = info.value.problems
    assert (
        "sessions.idle_timeout: expected a number of seconds or a duration such as 500ms, 30s,"
        " 15m, 1h30m, got '15 minutes'" in problems
    )
    assert "sessions.max_age: set either max_age or max_age_s, not both" in problems


def test_serve_takes_collector_tls_and_durations(tmp_path: Path) -> None:
    for name in ("server.pem", "server.key", "ca.pem", "export-ca.pem", "me.pem", "me.key"):
        (tmp_path / name).write_text("placeholder")
    config = parse_config(
        {
            "serve": {
                "tls": {
                    "cert_file": str(tmp_path / "server.pem"),
                    "key_file": str(tmp_path / "server.key"),
                    "ca_file": str(tmp_path / "ca.pem"),  # verifies clients: mutual TLS
                },
                "shutdown_timeout": "30s",
                "tick_interval": "250ms",
                "export": {
                    "endpoint": "https://collector:4317",
                    "timeout": "5s",
                    "tls": {
                        "ca_file": str(tmp_path / "export-ca.pem"),
                        "cert_file": str(tmp_path / "me.pem"),
                        "key_file": str(tmp_path / "me.key"),
                    },
                },
            }
        }
    )
    serve = serve_config(config)
    assert serve.tls.client_ca_file == str(tmp_path / "ca.pem")
    assert (serve.shutdown_timeout_s, serve.tick_interval_s) == (30.0, 0.25)
    export = serve.export
    assert export.timeout_s == 5.0
    assert export.certificate_file == str(tmp_path / "export-ca.pem")
    assert export.client_certificate_file == str(tmp_path / "me.pem")
    assert export.client_key_file == str(tmp_path / "me.key")


def test_export_tls_insecure_and_unknown_keys() -> None:
    serve = serve_config(
        parse_config(
            {"serve": {"export": {"endpoint": "collector:4317", "tls": {"insecure": True}}}}
        )
    )
    assert serve.export.insecure is True
    with pytest.raises(ConfigError) as info:
        parse_config({"serve": {"export": {"tls": {"insecure_skip": True}}}})
    assert any(
        p.startswith("serve.export.tls.insecure_skip: unknown setting (allowed: ca_file,")
        for p in info.value.problems
    )


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_a_number_with_an_exponent_is_a_number_as_json_writes_it(
    tmp_path: Path, suffix: str
) -> None:
    import json

    from spanjudge.config import load_config

    judge = {
        "type": "openai",
        "base_url": "http://127.0.0.1:1/v1",
        "model": "m",
        "price": {"input_per_million": 0.000001, "output_per_million": 2e5},
        "budget": {"cost_per_hour": 0.000001},
    }
    text = json.dumps({"judges": {"llm": judge}})
    assert "1e-06" in text  # how json writes it
    path = tmp_path / f"spanjudge{suffix}"
    path.write_text(text)  # JSON is YAML too: both names are read by the YAML loader
    spec = load_config(str(path)).sections["judges"]["llm"]
    assert spec.settings["price"].input_per_million == pytest.approx(1e-6)
    assert spec.settings["price"].output_per_million == pytest.approx(2e5)
    assert spec.settings["budget"].cost_per_hour == pytest.approx(1e-6)
