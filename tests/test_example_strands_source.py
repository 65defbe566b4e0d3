"""What a newcomer copies from the Strands example: imports and the install line."""

from __future__ import annotations

import ast

import spanjudge
from tests.conftest import ROOT

EXAMPLE = ROOT / "examples" / "strands_agent.py"


def test_the_example_imports_from_the_package_root_only() -> None:
    tree = ast.parse(EXAMPLE.read_text())
    modules = [
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("spanjudge")
    ]
    assert modules and set(modules) == {"spanjudge"}, modules
    names = [
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "spanjudge"
        for alias in node.names
    ]
    assert set(names) <= set(spanjudge.__all__)


def test_the_install_line_is_the_readmes() -> None:
    docstring = ast.get_docstring(ast.parse(EXAMPLE.read_text())) or ""
    for doc in (ROOT / "README.md", ROOT / "docs" / "in-process.md"):
        assert "pip install '.[strands]'" in doc.read_text(), doc
    installs = [line.split("#")[0].strip() for line in docstring.splitlines() if "pip " in line]
    assert installs == ["pip install '.[strands]'"]
    assert "pip install '.[strands]'" in EXAMPLE.read_text().split("except ImportError")[1]
