"""Agents that send a new agent name or expected skill with every session cannot mint a series
each: past `labels.max_values` names per label they are `other`; listed names always pass."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from spanjudge.config import parse_config
from spanjudge.errors import ConfigError
from tests.sidecar.helpers import SidecarProcess, serve_config, synthetic_session, wait_for

pytestmark = pytest.mark.slow
SESSIONS = 12


def _values(text: str, label: str) -> set[str]:
    # "" is the exporter's filler on series that do not carry the label
    return set(re.findall(label + r'="([^"]*)"', text)) - {""}


@pytest.mark.parametrize("workers", [1, 2])
def test_agent_and_skill_labels_are_capped(tmp_path: Path, workers: int) -> None:
    config = {
        **serve_config(
            tmp_path,
            sessions={"idle_timeout_s": 60, "end_grace_s": 0.1},
            workers=workers,
            metrics_endpoint="127.0.0.1:0",
        ),
        "labels": {"max_values": 3, "agents": ["vip-agent"], "skills": ["vip-skill"]},
    }
    sidecar = SidecarProcess(tmp_path, config).start()
    try:
        exporter = OTLPSpanExporter(endpoint=sidecar.endpoints["grpc"], insecure=True)
        for i in range(SESSIONS):
            spans = synthetic_session(
                f"card-{i}", agent=f"agent-{i}", expected_skills=(f"skill-{i}",)
            )
            assert exporter.export(spans) == SpanExportResult.SUCCESS
        # the listed names come last, after the caps are long full
        vip = synthetic_session("card-vip", agent="vip-agent", expected_skills=("vip-skill",))
        assert exporter.export(vip) == SpanExportResult.SUCCESS
        exporter.shutdown()
        url = f"http://{sidecar.endpoints['metrics']}/metrics"

        def scrape() -> str:
            with urllib.request.urlopen(url, timeout=10) as response:
                return str(response.read().decode())

        assert wait_for(lambda: "vip-agent" in scrape(), 20)
        text = scrape()
        agents = _values(text, "gen_ai_agent_name")
        skills = _values(text, "gen_ai_skill_name")
        if workers == 1:  # the first names judged take the places: here, the first sent
            assert agents == {"agent-0", "agent-1", "agent-2", "other", "vip-agent"}
            assert skills == {"skill-0", "skill-1", "skill-2", "other", "vip-skill"}
        else:  # in the order two processes judged them: three of them, whichever came first
            assert {"other", "vip-agent"} <= agents and len(agents) == 5
            assert agents - {"other", "vip-agent"} <= {f"agent-{i}" for i in range(SESSIONS)}
            assert {"other", "vip-skill"} <= skills and len(skills) == 5
            assert skills - {"other", "vip-skill"} <= {f"skill-{i}" for i in range(SESSIONS)}
        assert "reported as 'other'" in sidecar.log.read_text()
    finally:
        assert sidecar.terminate() == 0


def test_labels_section_problems_name_the_setting() -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config({"labels": {"max_values": -1, "agents": "one", "color": 1}})
    problems = raised.value.problems
    assert any(p.startswith("labels.max_values: expected a whole number") for p in problems)
    assert any(p.startswith("labels.agents: expected a list") for p in problems)
    assert any(p.startswith("labels.color: unknown setting") for p in problems)


def test_stale_series_expire_and_free_their_label(tmp_path: Path) -> None:
    """A series not updated for `labels.series_ttl` disappears from `/metrics`, and the agent
    name it carried gives its place under `labels.max_values` back to a new agent."""
    config = {
        **serve_config(
            tmp_path,
            sessions={"idle_timeout_s": 60, "end_grace_s": 0.1},
            metrics_endpoint="127.0.0.1:0",
        ),
        "labels": {"max_values": 1, "series_ttl": "3s"},  # seen before it expires, under load
    }
    sidecar = SidecarProcess(tmp_path, config).start()
    try:
        exporter = OTLPSpanExporter(endpoint=sidecar.endpoints["grpc"], insecure=True)
        url = f"http://{sidecar.endpoints['metrics']}/metrics"

        def scrape() -> str:
            with urllib.request.urlopen(url, timeout=10) as response:
                return str(response.read().decode())

        def agents() -> set[str]:
            return _values(scrape(), "gen_ai_agent_name")

        assert exporter.export(synthetic_session("ttl-1", agent="early-agent")) == (
            SpanExportResult.SUCCESS
        )
        assert wait_for(lambda: agents() == {"early-agent"}, 20)
        assert "spanjudge_verdicts_total{" in scrape()
        # nothing new for longer than the ttl: every series of that agent is gone
        assert wait_for(lambda: agents() == set(), 10)
        text = scrape()
        assert "spanjudge_verdicts_total{" not in text
        assert "spanjudge_session_duration_bucket{" not in text
        assert "spanjudge_sessions_total" in text  # self-telemetry carries no agent: kept
        # the cap of one agent name is free again: a new agent is not reported as `other`
        assert exporter.export(synthetic_session("ttl-2", agent="later-agent")) == (
            SpanExportResult.SUCCESS
        )
        assert wait_for(lambda: agents() == {"later-agent"}, 20)
        exporter.shutdown()
    finally:
        assert sidecar.terminate() == 0


def test_series_ttl_setting_problems() -> None:
    assert parse_config({}).series_ttl_s == 3600.0
    assert parse_config({"labels": {"series_ttl": "15m"}}).series_ttl_s == 900.0
    assert parse_config({"labels": {"series_ttl_s": 0}}).series_ttl_s == 0.0
    with pytest.raises(ConfigError) as raised:
        parse_config({"labels": {"series_ttl": "soon", "max_values": 3}})
    assert any(p.startswith("labels.series_ttl: expected") for p in raised.value.problems)
    with pytest.raises(ConfigError) as raised:  # a bare number is no duration: not ignored
        parse_config({"labels": {"series_ttl": 300}})
    assert any(p.startswith("labels.series_ttl: expected") for p in raised.value.problems)
    with pytest.raises(ConfigError) as raised:
        parse_config({"labels": {"series_ttl_s": -1}})
    assert any(p.startswith("labels.series_ttl_s: expected") for p in raised.value.problems)
