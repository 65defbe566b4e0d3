"""Every fixture's JSON report stays what it was: a change made for speed moves no report.

`fixture_report_digests.json` holds, per fixture directory, a digest of each session's report,
of the summary and of the input block (SHA-256 of the canonical JSON, first 16 hex digits), as
the tree before the serve speed work wrote them. A change that is meant to move a report (a
recognition fix, a new evaluator) updates them, and its commit says which sessions moved and
why:

    python tests/test_fixture_reports_unchanged.py --update
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest

if __name__ == "__main__":  # run as a script from anywhere: the repository's root on the path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.conftest import FIXTURES
from tests.support.fixture_reports import report

DIGESTS = Path(__file__).with_name("fixture_report_digests.json")


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


def _directories() -> list[str]:
    return sorted(p.name for p in FIXTURES.iterdir() if p.is_dir() and any(p.glob("*.jsonl")))


def digests(directory: str) -> dict[str, Any]:
    got = report(str(FIXTURES / directory))
    return {
        "summary": _digest(got["summary"]),
        "input": _digest(got["input"]),
        "sessions": {s["session_id"]: _digest(s) for s in got["sessions"]},
    }


def test_every_fixture_directory_has_its_digests() -> None:
    assert sorted(json.loads(DIGESTS.read_text())) == _directories()


@pytest.mark.parametrize("directory", _directories())
def test_the_fixture_report_is_unchanged(directory: str) -> None:
    expected = json.loads(DIGESTS.read_text())[directory]
    got = digests(directory)
    assert sorted(got["sessions"]) == sorted(expected["sessions"]), "sessions found differ"
    moved = [sid for sid, d in got["sessions"].items() if expected["sessions"][sid] != d]
    assert not moved, f"{directory}: the report of {len(moved)} session(s) moved: {moved[:5]}"
    assert got["summary"] == expected["summary"], f"{directory}: the summary moved"
    assert got["input"] == expected["input"], f"{directory}: the input block moved"


if __name__ == "__main__":
    if sys.argv[1:] != ["--update"]:
        sys.exit("usage: python tests/test_fixture_reports_unchanged.py --update")
    DIGESTS.write_text(
        json.dumps({d: digests(d) for d in _directories()}, indent=1, sort_keys=True) + "\n"
    )
    print(f"wrote {DIGESTS}")
