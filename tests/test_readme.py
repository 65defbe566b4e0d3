"""The configuration the README and docs/ show is accepted as written, and their code runs (docs
match behaviour)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from spanjudge.config import parse_config
from spanjudge.expectations import parse_entries
from tests.conftest import ROOT

DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCKS = [
    block
    for path in DOCUMENTS
    for block in re.findall(r"```yaml\n(.*?)```", path.read_text(), re.S)
]


def test_readme_has_config_examples() -> None:
    assert len(BLOCKS) >= 4


@pytest.mark.parametrize("block", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_yaml_is_valid(block: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("server.pem", "server.key", "ca.pem"):
        (tmp_path / name).write_text("placeholder")
    (tmp_path / "expectations.yaml").write_text("sessions: {}\n")
    monkeypatch.setenv("SPANJUDGE_TOKEN", "t")
    monkeypatch.setenv("OPENAI_API_KEY", "k")  # api_key_env must name a set variable
    doc = yaml.safe_load(block.replace("serve: {...}", ""))
    sessions = doc.get("sessions")
    if isinstance(sessions, dict) and any(isinstance(v, dict) for v in sessions.values()):
        assert parse_entries(doc, "README")  # an expectations file
    else:
        parse_config(doc, str(tmp_path / "spanjudge.yaml"))


# docs/in-process.md: the short form (also the README's), the setup by hand, an agent's own test.
PYTHON = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "in-process.md").read_text(), re.S)


def test_the_readme_in_process_block_is_the_docs_short_form() -> None:
    [readme] = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert readme == PYTHON[0]


def test_readme_in_process_full_form_runs_and_judges(tmp_path: Path) -> None:
    """docs/in-process.md's setup by hand, with in-memory exporters in place of OTLP ones and
    the demo agent."""
    snippet = PYTHON[1]
    swaps = {
        "OTLPLogExporter()": "LOGS",
        "OTLPMetricExporter()": "METRICS",
        "OTLPSpanExporter()": "SPANS",
        'load_config("spanjudge.yaml")': "load_config(None)",
        "# ... run the agent ...": "ScriptedAgent().run(SCENARIOS[1])",
    }
    for old, new in swaps.items():
        assert old in snippet, old
        snippet = snippet.replace(old, new)
    script = tmp_path / "setup.py"
    script.write_text(
        "from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter\n"
        "from opentelemetry.sdk.metrics.export import InMemoryMetricReader\n"
        "from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter\n"
        "from opentelemetry.sdk.metrics.export import ConsoleMetricExporter\n"
        "from spanjudge.demo.agent import SCENARIOS, ScriptedAgent\n"
        "import io, json\n"
        "LOGS, SPANS = InMemoryLogRecordExporter(), InMemorySpanExporter()\n"
        "METRICS = ConsoleMetricExporter(out=io.StringIO())\n"
        + snippet
        + "\nnames = {s.name for s in SPANS.get_finished_spans()}\n"
        "logs = [r.log_record.event_name for r in LOGS.get_finished_logs()]\n"
        "print(json.dumps({'evaluate': 'spanjudge.evaluate' in names, 'logs': logs}))\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["evaluate"] is True
    assert result["logs"] and set(result["logs"]) == {"gen_ai.evaluation.result"}


def test_readme_short_form_exports_verdicts_over_real_otlp(tmp_path: Path) -> None:
    """The first in-process block (README and docs/in-process.md), as written but for the
    agent, with the shipped examples/spanjudge.yaml, exporting over OTLP/gRPC to a real receiver
    (the standard env)."""
    from tests.sidecar.helpers import VerdictServer

    snippet = PYTHON[0]
    assert len(snippet.strip().splitlines()) <= 5
    swaps = {
        '"spanjudge.yaml"': repr(str(ROOT / "examples" / "spanjudge.yaml")),
        "# ... run the agent ...": "ScriptedAgent().run(SCENARIOS[1])",
    }
    for old, new in swaps.items():
        assert old in snippet, old
        snippet = snippet.replace(old, new)
    script = tmp_path / "short.py"
    script.write_text("from spanjudge.demo.agent import SCENARIOS, ScriptedAgent\n" + snippet)
    server = VerdictServer()
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        env.update(OTEL_EXPORTER_OTLP_ENDPOINT=server.endpoint, OTEL_SERVICE_NAME="readme-agent")
        done = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env
        )
        assert done.returncode == 0, done.stderr
        received = server.received
        assert [s["attrs"]["session.id"] for s in received.eval_spans] == ["demo-incident"]
        names = {e["gen_ai.evaluation.name"] for e in received.eval_spans[0]["events"]}
        assert {"skill_loaded", "outcome", "robustness"} <= names
        failed = {
            r["gen_ai.evaluation.name"]
            for r in received.log_records
            if r.get("spanjudge.outcome") == "fail"
        }
        assert "skill_loaded" in failed  # incident-triage was required and never loaded
        assert any(name.startswith("spanjudge.") for name in received.metric_names)
    finally:
        server.stop()


@pytest.mark.parametrize(("scenario", "passes"), [(0, True), (1, False)])
def test_readme_test_of_an_agent_with_a_collecting_sink(
    scenario: int, passes: bool, tmp_path: Path
) -> None:
    """docs/in-process.md's block for an agent's own tests, with the demo agent: its assertion holds
    for a session that passes and stops a session whose required skill never loaded."""
    snippet = PYTHON[2]
    run = "# ... run the agent on `provider` ..."
    assert run in snippet
    snippet = snippet.replace(
        run, f"ScriptedAgent(provider).run(SCENARIOS[{scenario}], end_session=True)"
    )
    script = tmp_path / "agent_test.py"
    script.write_text("from spanjudge.demo.agent import SCENARIOS, ScriptedAgent\n" + snippet)
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env
    )
    if passes:
        assert done.returncode == 0, done.stderr
    else:
        assert done.returncode == 1 and "AssertionError" in done.stderr, done.stderr
        assert "skill_loaded" in done.stderr and "'fail'" in done.stderr


SERVE_EXAMPLE = ROOT / "collector-config" / "spanjudge-serve.yaml"


def test_readme_serve_block_is_the_shipped_serve_configuration() -> None:
    [block] = [b for b in BLOCKS if b.startswith("serve:")]
    assert yaml.safe_load(block)["serve"] == yaml.safe_load(SERVE_EXAMPLE.read_text())["serve"]


def test_every_file_the_docs_link_or_name_exists() -> None:
    readme = (ROOT / "README.md").read_text()
    assert {"ARCHITECTURE.md", "CONTRIBUTING.md", "CHANGELOG.md", "LICENSE"} <= set(
        re.findall(r"\]\(([^)#:]+)\)", readme)
    )
    missing = []
    for path in DOCUMENTS:
        text = path.read_text()
        links = re.findall(r"\]\(([^)#:]+)\)", text)
        named = re.findall(r"`((?:examples|collector-config|bench)/[\w./-]+\.(?:py|yaml))`", text)
        missing += [f"{path.name}: {p}" for p in links if not (path.parent / p).exists()]
        missing += [f"{path.name}: {p}" for p in named if not (ROOT / p).exists()]
    assert missing == []


def test_the_license_is_the_one_pyproject_declares() -> None:
    import tomllib

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"]
    text = (ROOT / "LICENSE").read_text()
    assert declared == {"text": "Apache-2.0"}
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
