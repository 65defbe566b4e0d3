"""docs/ is the reference: every configuration key the code accepts has its row in
docs/configuration.md, every flag of every `spanjudge` subcommand its row in docs/cli.md, and every
relative link in README.md and docs/*.md resolves. The keys and flags come from the code, so adding
one without documenting it fails here."""

from __future__ import annotations

import argparse
import re
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

import pytest

from spanjudge import conditions, config, expectations, reasons, sampling
from spanjudge.cli_parser import build_parser
from spanjudge.emit import plugins
from spanjudge.evaluators import cost, robustness, side_effects, trajectory_validity
from spanjudge.judges import registry
from spanjudge.recognition import declared
from spanjudge.sessions.store import ClosePolicy
from spanjudge.sidecar import _parser as serve_parser
from spanjudge.sidecar.config import ServeConfig
from spanjudge.spans.limits import Limits
from tests.conftest import ROOT

DOCS = ROOT / "docs"


def _dataclass_keys(prefix: str, cls: Any) -> set[str]:
    keys = set()
    for f in fields(cls):
        keys.add(f"{prefix}.{f.name}")
        default = getattr(cls(), f.name)
        if is_dataclass(default):
            keys |= _dataclass_keys(f"{prefix}.{f.name}", type(default))
    return keys


def config_keys() -> set[str]:
    """Every section and key of the configuration, as `section.key` (nested: `a.b.c`)."""
    keys = set(config.TOP_LEVEL)
    keys |= _dataclass_keys("sessions", ClosePolicy) | {"sessions.mode"}
    keys |= {f"expectations.{k}" for k in expectations.RULE_KEYS}
    keys |= {f"evaluators.{name}" for name in reasons.BUILTIN_EVALUATORS}
    keys |= {"evaluators.*.enabled", "evaluators.*.judge"}
    keys |= {f"evaluators.*.{k}" for k in sampling.SELECTION_KEYS} | {"evaluators.judged"}
    keys |= {f"evaluators.*.when.{k}" for k in sampling.WHEN_KEYS}
    for name, options in (
        (reasons.TRAJECTORY_VALIDITY, trajectory_validity.OPTIONS),
        (reasons.COST, cost.OPTIONS),
        (reasons.ROBUSTNESS, robustness.OPTIONS),
        (reasons.SIDE_EFFECTS, side_effects.OPTIONS),
        (reasons.OUTCOME, conditions.RULE_KEYS),
        (reasons.INSTRUCTION_FOLLOWING, ("pass_threshold",)),  # its own unknown_options list
    ):
        keys |= {f"evaluators.{name}.{option}" for option in options}
    keys |= {"judges.*.type"} | {
        f"judges.*.{key}" for allowed in registry._KEYS.values() for key in allowed
    }
    keys |= {"effects.resource_args", "effects.<tool>"}
    keys |= _dataclass_keys("limits", Limits)
    keys |= {f"labels.{k}" for k in config._LABEL_KEYS}
    keys |= _dataclass_keys("serve", ServeConfig)
    keys |= {f"emit.{k}" for k in plugins._KEYS}
    keys |= {"skills.paths"}
    keys |= {f"conventions.*.{k}" for k in declared.TOP_KEYS}
    keys |= {f"conventions.*.<role>.{k}" for k in declared.MATCH_KEYS}
    keys |= {f"conventions.*.{role}.{k}" for role, ks in declared.ROLE_FIELDS.items() for k in ks}
    return keys


def cli_flags() -> dict[str, set[str]]:
    """Each subcommand's option strings (and positional arguments' names), from the parsers."""
    top, subs = build_parser()
    parsers = {"spanjudge": top, **subs, "serve": serve_parser()}  # serve --help is the sidecar's
    flags: dict[str, set[str]] = {}
    for name, parser in parsers.items():
        found = flags.setdefault(name, set())
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction | argparse._HelpAction):
                continue
            found |= set(action.option_strings) or {action.metavar or action.dest}
    flags["serve"] |= {o for a in subs["serve"]._actions for o in a.option_strings}
    return flags


def _rows(text: str) -> set[str]:
    """The first cell of every table row: `| `key` | ...` (a cell may list several, `a`, `b`)."""
    cells = re.findall(r"^\| ([^|]+) \|", text, flags=re.MULTILINE)
    return {name.split()[0] for cell in cells for name in re.findall(r"`([^`]+)`", cell)}


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start : end if end != -1 else len(text)]


def test_every_configuration_key_has_a_row() -> None:
    documented = _rows((DOCS / "configuration.md").read_text(encoding="utf-8"))
    missing = sorted(config_keys() - documented)
    assert not missing, f"docs/configuration.md lacks a row for: {missing}"


def test_the_key_list_sees_the_nested_sections() -> None:
    keys = config_keys()
    assert {"serve.spool.synchronous", "serve.export.endpoint", "sessions.idle_timeout_s"} <= keys
    assert {"evaluators.cost.budget", "judges.*.deadline_s", "conventions.*.turn.request"} <= keys


@pytest.mark.parametrize("command", sorted(cli_flags()))
def test_every_cli_flag_has_a_row_in_its_command_section(command: str) -> None:
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    heading = "## `spanjudge`" if command == "spanjudge" else f"## `spanjudge {command}`"
    documented = _rows(_section(text, heading + "\n"))
    missing = sorted(cli_flags()[command] - documented)
    assert not missing, f"docs/cli.md section {heading} lacks a row for: {missing}"


def test_a_flag_taken_out_of_the_docs_fails_the_check() -> None:
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    section = _section(text, "## `spanjudge eval`\n")
    assert "--strict" in _rows(section)
    without = "\n".join(line for line in section.splitlines() if "`--strict`" not in line)
    assert "--strict" not in _rows(without)


MARKDOWN = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]


@pytest.mark.parametrize("path", MARKDOWN, ids=[p.name for p in MARKDOWN])
def test_every_relative_link_resolves(path: Path) -> None:
    links = re.findall(r"\]\(([^)\s]+)\)", path.read_text(encoding="utf-8"))
    relative = [link.split("#")[0] for link in links if ":" not in link and link.split("#")[0]]
    missing = [link for link in relative if not (path.parent / link).exists()]
    assert not missing, f"{path.name}: {missing}"


def test_the_readme_links_every_reference_document() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    unlinked = [p.name for p in DOCS.glob("*.md") if f"](docs/{p.name})" not in readme]
    assert not unlinked
