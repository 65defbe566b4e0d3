"""A new user's first day, in process: each fixture framework with its scripted model.

The agent runs with `configure_opentelemetry()` as the README shows, with no Collector and no
`OTEL_*` variable (`tests/support/first_day_agent.py`, which runs the framework's own fixture
generator). What the user sees on the terminal: one verdict line per judged turn for every
session the agent ran, each printed when its turn ended (before the agent's shutdown), none of
them cut short, no other line from spanjudge, and nothing at all once the agent is done (no
session left for the shutdown, no verdict lost on the way out).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, unavailable
from tests.support.first_day_agent import MARK

pytestmark = [pytest.mark.slow]

DRIVER = ROOT / "tests" / "support" / "first_day_agent.py"
GENERATORS = ROOT / "fixtures" / "generate"

# framework -> (the modules its generator needs, the name `SPANJUDGE_REQUIRE` knows it by)
OPENINFERENCE_OA = ("agents", "openinference.instrumentation.openai_agents")
OPENLLMETRY_OA = (
    "agents",
    "opentelemetry.instrumentation.openai_agents",
    "opentelemetry.processor.baggage",
)
FRAMEWORKS: dict[str, tuple[tuple[str, ...], str]] = {
    "genai_manual": (("opentelemetry.sdk",), "opentelemetry-sdk"),
    "strands": (("strands",), "strands"),
    "langgraph": (("langgraph", "openinference.instrumentation.langchain"), "langgraph"),
    "deepagents": (("deepagents", "openinference.instrumentation.langchain"), "deepagents"),
    "pydantic_ai": (("pydantic_ai_harness",), "pydantic-ai"),
    "smolagents": (("smolagents", "openinference.instrumentation.smolagents"), "smolagents"),
    "haystack": (("haystack", "haystack_integrations.tracing.opentelemetry"), "haystack"),
    "agent_framework": (("agent_framework.observability",), "agent-framework"),
    "openai_agents_openinference": (OPENINFERENCE_OA, "openai-agents"),
    "openai_agents_openllmetry": (OPENLLMETRY_OA, "openai-agents"),
    "mcp_openinference": (("mcp", *OPENINFERENCE_OA), "mcp"),
    "mcp_openllmetry": (("mcp", *OPENLLMETRY_OA), "mcp"),
}
# Fixture generators whose framework does not run in process here, and why (their recorded
# traces are judged in tests/test_fixtures_acceptance.py all the same).
NOT_IN_PROCESS = {
    "adk": "google-adk 2.13 requires OpenTelemetry SDK <= 1.44; spanjudge requires >= 1.45",
    "adk_legacy": "google-adk 1.30 requires OpenTelemetry SDK < 1.39; spanjudge requires >= 1.45",
    "openllmetry": "traceloop-sdk 0.52 runs on OpenTelemetry SDK 1.38; spanjudge requires >= 1.45",
    "agentops": "agentops 0.4.21 exports on OpenTelemetry SDK <= 1.44; spanjudge requires >= 1.45",
    "claude_code": "Claude Code is a Node.js CLI that exports OTLP: its front end is the sidecar",
    "adk_go": "a Go program (ADK for Go) that exports OTLP; .ci/run builds no Go agent for it",
    "spring_ai": "a Java (Spring Boot) app that exports OTLP: not run by .ci/run (its traces are "
    "recorded)",
    **dict.fromkeys(
        (
            "agentscope",
            "agno",
            "autogen",
            "beeai",
            "crewai",
            "dspy",
            "langfuse",
            "litellm",
            "llamaindex",
            "lmnr",
            "logfire",
            "mirascope",
            "mlflow",
            "openlit",
            "semantic_kernel",
        ),
        "not run in process yet: .ci/run builds no venv for it (its traces are recorded)",
    ),
}
LINE = re.compile(r"^spanjudge: session (?P<id>\S+)(?: \((?P<notes>[^)]*)\))?: (?P<marks>.*)$")
MARK_RE = re.compile(r"\b[a-z_]+=(PASS|FAIL|n/e)\b")
TRACE_ID = re.compile(r"^[0-9a-f]{32}$")
OWN_FRAME = re.compile(r"(src|site-packages)[/\\]spanjudge[/\\]")  # a stack through spanjudge


def _ours(line: str) -> bool:
    """A line spanjudge wrote (its logger's lines start with its name) or a frame of its code."""
    return line.lower().startswith("spanjudge") or OWN_FRAME.search(line) is not None


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package is missing
        return False


def _run(framework: str, tmp: Path) -> tuple[list[str | None], list[str]]:
    modules, name = FRAMEWORKS[framework]
    missing = [module for module in modules if not _importable(module)]
    if missing:
        unavailable(name, f"{', '.join(missing)} not installed in this interpreter")
    # a new user's shell: no OTel or spanjudge variables
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "SPANJUDGE_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(GENERATORS)])
    env["TMPDIR"] = str(tmp)  # the generators' scratch workspaces
    done = subprocess.run(
        [sys.executable, str(DRIVER), framework],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.splitlines()[-1]), done.stderr.splitlines()


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_verdicts_show_on_the_terminal_as_each_turn_ends(framework: str, tmp_path: Path) -> None:
    sessions, stderr = _run(framework, tmp_path)
    assert MARK in stderr, stderr
    before, after = stderr[: stderr.index(MARK)], stderr[stderr.index(MARK) + 1 :]
    # Nothing once the agent is done: no session waited for the shutdown, and no export failed
    # or lost anything. Before, only spanjudge's verdict lines: no warning, no stack through its
    # code (the framework's own lines, a scripted tool's failure, are its business).
    assert after == [], after
    ours = [line for line in before if _ours(line)]
    lines = [LINE.match(line) for line in ours]
    assert all(lines), [line for line, m in zip(ours, lines, strict=True) if m is None]
    printed: dict[str, list[re.Match[str]]] = {}
    for m in lines:
        assert m is not None
        printed.setdefault(m["id"], []).append(m)
    named = {s for s in sessions if s is not None}
    by_trace = {s for s in printed if s not in named}
    assert named <= set(printed), f"never printed: {sorted(named - set(printed))}"
    # sessions keyed by nothing but their trace are printed under the trace id
    assert len(by_trace) == sessions.count(None), sorted(by_trace)
    assert all(TRACE_ID.match(s) for s in by_trace), sorted(by_trace)
    for session, found in printed.items():
        for m in found:
            assert "cut short" not in (m["notes"] or ""), m.string
            assert MARK_RE.search(m["marks"]), m.string
        # later turns of a session are new revisions of it, in order
        revisions = [
            int(r.group(1)) if (r := re.search(r"revision (\d+)", m["notes"] or "")) else 1
            for m in found
        ]
        assert revisions == list(range(1, len(found) + 1)), (session, revisions)


def test_every_fixture_framework_runs_here_or_says_why_not() -> None:
    generators = {
        path.name.removesuffix("_fixtures.py") for path in GENERATORS.glob("*_fixtures.py")
    }
    walked = {re.sub(r"_(openinference|openllmetry)$", "", name) for name in FRAMEWORKS}
    assert walked <= generators, walked - generators
    assert generators - walked == set(NOT_IN_PROCESS), generators - walked
