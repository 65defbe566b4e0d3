"""Code and docs cite documents in this repository only: `ARCHITECTURE.md section N`, never the
design notes the project started from (they are not shipped, so a newcomer cannot follow them)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ["src", "tests", "bench", "examples", "fixtures", "collector-config", "scripts", ".ci"]
TRACES = {".jsonl", ".pb", ".gz"}  # recorded spans, not prose
OUTSIDE = "DESIGN" + " section"  # spelt apart so this file does not cite it


def test_no_citation_of_a_document_outside_the_repository() -> None:
    files = [p for p in ROOT.glob("*.md")]
    for top in SHIPPED:
        files += [
            p
            for p in (ROOT / top).rglob("*")
            if p.is_file()
            and "__pycache__" not in p.parts
            and not any(part.endswith(".egg-info") for part in p.parts)  # build output
            and p.suffix not in TRACES
        ]
    cited = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # binary files
        cited += [
            f"{path.relative_to(ROOT)}:{n}"
            for n, line in enumerate(text.splitlines(), 1)
            if OUTSIDE in line
        ]
    assert not cited, f"cite ARCHITECTURE.md section N instead: {cited}"
