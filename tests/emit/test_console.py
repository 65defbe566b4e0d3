"""The console sink: verdicts on stderr with no Collector, one line per session."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from spanjudge import SpanJudgeProcessor
from spanjudge.config import parse_config
from spanjudge.demo.agent import SCENARIOS, ScriptedAgent
from spanjudge.emit.console import ConsoleSink
from spanjudge.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
CSV, INCIDENT, WEATHER = SCENARIOS

# The README's in-process form with a scripted agent; stdout is left to the agent.
SCRIPT = """
import sys
from spanjudge import configure_opentelemetry
from spanjudge.demo.agent import SCENARIOS, ScriptedAgent

otel = configure_opentelemetry(sys.argv[1])
agent = ScriptedAgent()
for scenario in SCENARIOS:
    agent.run(scenario)
otel.shutdown()
"""


def _run(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "SPANJUDGE_"))}
    clean.pop("NO_COLOR", None)
    script = tmp_path / "agent.py"
    script.write_text(SCRIPT)
    return subprocess.run(
        [sys.executable, str(script), str(ROOT / "examples" / "spanjudge.yaml")],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_with_no_collector_the_verdicts_are_printed_and_nothing_fails_at_exit(
    tmp_path: Path,
) -> None:
    run = _run(tmp_path)
    assert run.returncode == 0, run.stderr
    lines = run.stderr.splitlines()
    assert [line.split(":")[1].strip() for line in lines] == [
        f"session {s.session_id}" for s in (CSV, INCIDENT, WEATHER)
    ]
    incident = lines[1]
    assert "skill_loaded=FAIL" in incident and "trajectory_validity=PASS" in incident
    assert "-- skill_loaded: required skill 'incident-triage' was never loaded" in incident
    assert "cut short" not in run.stderr and "\033[" not in run.stderr  # piped: no colour
    assert "did not finish" not in run.stderr and "OTLP" not in run.stderr


def test_an_endpoint_means_no_console_unless_asked(tmp_path: Path) -> None:
    # An endpoint no one listens on: what matters is only whether lines are printed.
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_BSP_SCHEDULE_DELAY": "10"}
    quiet = _run(tmp_path, **env)
    assert "spanjudge: session" not in quiet.stderr
    asked = _run(tmp_path, SPANJUDGE_CONSOLE="1", **env)
    assert asked.stderr.count("spanjudge: session") == 3


def test_otel_sdk_disabled_runs_nothing(tmp_path: Path) -> None:
    run = _run(tmp_path, OTEL_SDK_DISABLED="true", SPANJUDGE_CONSOLE="1")
    assert run.returncode == 0 and run.stderr == ""


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("env", "coloured"), [({}, True), ({"NO_COLOR": "1"}, False)])
def test_the_line_is_coloured_as_the_table_is(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], coloured: bool
) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    out = _Tty()
    processor = SpanJudgeProcessor(sinks=[ConsoleSink(out)], shutdown_on_exit=False)
    ScriptedAgent(processor_provider(processor)).run(INCIDENT)
    processor.shutdown()
    assert ("skill_loaded=\033[31mFAIL\033[0m" in out.getvalue()) is coloured
    assert ("skill_loaded=FAIL" in out.getvalue()) is not coloured


def processor_provider(processor: SpanJudgeProcessor) -> object:
    from opentelemetry.sdk.trace import TracerProvider

    provider = TracerProvider()
    provider.add_span_processor(processor)
    return provider


def test_sinks_console_in_the_configuration(capsys: pytest.CaptureFixture[str]) -> None:
    processor = SpanJudgeProcessor(
        parse_config({"emit": {"sinks": ["console"]}}), sinks=[], shutdown_on_exit=False
    )
    ScriptedAgent(processor_provider(processor)).run(WEATHER)
    processor.shutdown()
    assert capsys.readouterr().err.startswith(f"spanjudge: session {WEATHER.session_id}: ")


def test_console_takes_no_options() -> None:
    with pytest.raises(ConfigError, match=r"emit.sinks.console: takes no options"):
        parse_config({"emit": {"sinks": {"console": {"colour": True}}}})
