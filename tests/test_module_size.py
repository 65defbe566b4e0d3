"""CONTRIBUTING: every module stays under 400 lines."""

from __future__ import annotations

from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "spanjudge"


def test_every_module_is_under_400_lines() -> None:
    long = {
        str(path.relative_to(SRC)): n
        for path in sorted(SRC.rglob("*.py"))
        if (n := len(path.read_text(encoding="utf-8").splitlines())) >= 400
    }
    assert long == {}
