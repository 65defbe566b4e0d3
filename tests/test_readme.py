"""The configuration the README shows is accepted as written (docs match behaviour)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from spanjudge.config import parse_config
from spanjudge.expectations import parse_entries
from tests.conftest import ROOT

BLOCKS = re.findall(r"```yaml\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


def test_readme_has_config_examples() -> None:
    assert len(BLOCKS) >= 4


@pytest.mark.parametrize("block", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_yaml_is_valid(block: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("server.pem", "server.key", "ca.pem"):
        (tmp_path / name).write_text("placeholder")
    (tmp_path / "expectations.yaml").write_text("sessions: {}\n")
    monkeypatch.setenv("SPANJUDGE_TOKEN", "t")
    doc = yaml.safe_load(block.replace("serve: {...}", ""))
    sessions = doc.get("sessions")
    if isinstance(sessions, dict) and any(isinstance(v, dict) for v in sessions.values()):
        assert parse_entries(doc, "README")  # an expectations file
    else:
        parse_config(doc, str(tmp_path / "spanjudge.yaml"))
