"""`spanjudge eval` imports only what the run needs: a release gate pays start-up on every build
(`bench/bench_startup.py` measures it). What an eval of OTLP JSON with no config must not load."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import FIXTURES
from tests.support.startup import modules_after

NOT_NEEDED = (
    "jsonschema",  # only when a tool schema is checked
    "google.protobuf.json_format",  # only protobuf -> JSON
    "google.protobuf",  # only for .pb input
    "yaml",  # only when a configuration or expectations file is read
    "importlib.metadata",  # only when a distribution declares a spanjudge plugin group
    "spanjudge.judges.openai",  # only when such a judge is configured
    "spanjudge.judges.bedrock",
    "spanjudge.sidecar",
    "spanjudge.emit.report",  # the JSON writer; the table is the default
    "spanjudge.calibration",  # only `spanjudge calibrate`
    "spanjudge.recognition.declared",  # only when a configuration declares conventions
    "spanjudge.judges.heuristic_tools",  # the opt-in tool judgements
    "spanjudge.judges.heuristic_outcome",  # only for a reference answer or a task
    "spanjudge.spans.otlp_json",  # the general decoders: a line the strict one declines
    "spanjudge.spans.otlp_proto",  # and protobuf input
    "gzip",  # only for .gz input
    "difflib",  # only to suggest a name after a mistake
    "opentelemetry.sdk.trace",  # the SDK is for the processor and the sidecar
    "opentelemetry.sdk.metrics",
    "spanjudge.calibrate",  # only `spanjudge calibrate`
    "spanjudge.config_values",  # only when a configuration file has a section with durations
    "spanjudge.evaluators.tool_selection",  # opt-in evaluators: only when configured
    "spanjudge.evaluators.tool_parameters",
)


def test_eval_of_json_lines_loads_nothing_it_does_not_use(tmp_path: Path) -> None:
    traces = FIXTURES / "claude_code" / "claude_code.jsonl"
    loaded = modules_after("eval", str(traces), "-q", "-o", str(tmp_path / "t.txt"), cwd=tmp_path)
    assert sorted(m for m in NOT_NEEDED if m in loaded) == []


def test_what_a_run_does_need_is_still_loaded_on_demand(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("sessions: {idle_timeout: 15m}\n")
    traces = FIXTURES / "claude_code" / "claude_code.jsonl"
    argv = ("eval", str(traces), "--config", str(config), "--format", "json", "-o", "r.json")
    loaded = modules_after(*argv, cwd=tmp_path)
    assert {"yaml", "spanjudge.emit.report"} <= loaded
    assert json.loads((tmp_path / "r.json").read_text())["sessions"]


def test_eval_leaves_the_stdlib_it_does_not_use_alone(tmp_path: Path) -> None:
    # `-S`: no `.pth` hooks or sitecustomize (some preload pathlib or tempfile at every start;
    # the test's sys.path is passed on, so the same spanjudge is found), so what is loaded is
    # what spanjudge asked for.
    traces = FIXTURES / "claude_code" / "claude_code.jsonl"
    argv = ("eval", str(traces), "-q", "-o", str(tmp_path / "t.txt"))
    loaded = modules_after(*argv, cwd=tmp_path, flags=("-S",))
    heavy = ("pathlib", "tempfile", "gzip", "difflib", "logging", "concurrent.futures")
    assert sorted(m for m in heavy if m in loaded) == []
    # shutil (with zlib, bz2, lzma): argparse asks it for the terminal's width, needed only to
    # print help or an error; threading and queue: only for a judge that waits (an LLM);
    # base64 (with binascii, struct): only for base64 ids or bytes values, not hex ids;
    # argparse (with gettext and locale): only for help, an error or an unusual command line;
    # importlib (and importlib.util): built-ins are imported by name, jsonschema is looked for;
    # typing (with warnings): the Protocols and type aliases are for type checkers, imported only
    # when someone asks for a Protocol (`spanjudge.<package>.protocols`).
    unused = ("shutil", "bz2", "lzma", "threading", "queue", "base64", "binascii", "struct")
    unused += ("argparse", "gettext", "locale", "importlib", "importlib.util", "typing", "warnings")
    assert sorted(m for m in unused if m in loaded) == []


def test_the_opt_in_tool_judges_load_no_typing(tmp_path: Path) -> None:
    # `from spanjudge.judges import heuristic_tools` would ask the package for the name first,
    # and its __getattr__ (spanjudge.typenames) runs its type-checking block, importing typing
    config = tmp_path / "c.yaml"
    config.write_text("evaluators: {tool_selection: {}, tool_parameters: {}}\n")
    traces = FIXTURES / "strands" / "strands_default.jsonl"
    argv = ("eval", str(traces), "--config", str(config), "-q", "-o", str(tmp_path / "t.txt"))
    loaded = modules_after(*argv, cwd=tmp_path, flags=("-S",))
    assert "spanjudge.judges.heuristic_tools" in loaded  # the tool judges did run
    assert sorted(m for m in ("typing", "ast", "spanjudge.judges.base") if m in loaded) == []
