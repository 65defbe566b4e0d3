"""The dependency rules of ARCHITECTURE.md section 12, read from the source: no import cycle
between packages (module-level, function-level and string imports all count) and no import of a
front end from the core."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import tomllib

import spanjudge
from spanjudge._version import __version__

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "spanjudge"
FRONT_ENDS = frozenset(
    {
        "spanjudge.processor",
        "spanjudge.quickstart",  # configure_opentelemetry: the in-process front end, set up
        "spanjudge.sidecar",
        "spanjudge.cli",
        "spanjudge.__main__",  # `python -m spanjudge`: the command line, as the console script
        "spanjudge.demo",
    }
)
# A module path written as a string for importlib: "spanjudge.x.y:attr" anywhere, or "spanjudge.x.y"
# in a module that calls importlib (elsewhere such a string is a name: metric `spanjudge.sessions`).
_STRING_IMPORT = re.compile(r"^(spanjudge(?:\.[A-Za-z_][A-Za-z0-9_]*)+)(:[\w.]+)?$")


@dataclass(frozen=True, slots=True, kw_only=True)
class Edge:
    source: str  # importing module
    target: str  # imported module
    line: int
    kind: str  # "import" or "string"


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str) -> bool:
    rel = Path(*name.split("."))
    return (SRC.parent / rel).with_suffix(".py").is_file() or (SRC.parent / rel).is_dir()


def package_of(module: str) -> str:
    """The node a module belongs to: its first-level package, or the top-level module itself."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else module


def imports_of(path: Path, name: str | None = None) -> Iterator[Edge]:
    """Every import in the module at ``path`` (named ``name``, else from its place in `src`)."""
    source = name or module_name(path)
    package = source if path.name == "__init__.py" else source.rpartition(".")[0]
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text, str(path))
    dynamic = "import_module" in text or "entry_points" in text
    for node in ast.walk(tree):  # every level: module, function, class, TYPE_CHECKING blocks
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Edge(source=source, target=alias.name, line=node.lineno, kind="import")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            for alias in node.names:
                candidate = f"{module}.{alias.name}"
                target = candidate if is_module(candidate) else module
                yield Edge(source=source, target=target, line=node.lineno, kind="import")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            match = _STRING_IMPORT.match(node.value)
            if match and (dynamic or match.group(2)) and is_module(match.group(1)):
                yield Edge(source=source, target=match.group(1), line=node.lineno, kind="string")


def package_edges() -> dict[tuple[str, str], Edge]:
    """(importing package, imported package) -> one example import, between different packages."""
    edges: dict[tuple[str, str], Edge] = {}
    for path in sorted(SRC.rglob("*.py")):
        for edge in imports_of(path):
            if not edge.target.startswith("spanjudge"):
                continue
            pair = (package_of(edge.source), package_of(edge.target))
            if pair[0] != pair[1]:
                edges.setdefault(pair, edge)
    return edges


def cycles(edges: dict[tuple[str, str], Edge]) -> list[list[str]]:
    """Strongly connected components with more than one package (Tarjan)."""
    graph: dict[str, list[str]] = {}
    for a, b in edges:
        graph.setdefault(a, []).append(b)
        graph.setdefault(b, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def describe(component: list[str], edges: dict[tuple[str, str], Edge]) -> str:
    lines = [" <-> ".join(component)]
    for (a, b), edge in sorted(edges.items()):
        if a in component and b in component:
            lines.append(f"  {edge.source} line {edge.line} imports {edge.target} ({edge.kind})")
    return "\n".join(lines)


def test_no_import_cycle_between_packages() -> None:
    edges = package_edges()
    found = cycles(edges)
    assert not found, "import cycles:\n" + "\n".join(describe(c, edges) for c in found)


def test_the_core_never_imports_a_front_end() -> None:
    offending = [
        f"{edge.source} line {edge.line} imports {edge.target}"
        for (a, b), edge in package_edges().items()
        if b in FRONT_ENDS and a not in FRONT_ENDS and a != "spanjudge"
    ]
    assert not offending


def test_nothing_inside_imports_the_public_facade() -> None:
    """`spanjudge/__init__.py` re-exports the public API; modules inside import the module that
    defines a name, so the facade can import them lazily without a cycle."""
    offending = [
        f"{edge.source} line {edge.line}"
        for path in SRC.rglob("*.py")
        for edge in imports_of(path)
        if edge.target == "spanjudge" and edge.source != "spanjudge"
    ]
    assert not offending


def test_the_checker_sees_every_kind_of_import(tmp_path: Path) -> None:
    """The walk counts function-level, relative and string imports (else a cycle could hide)."""
    probe = tmp_path / "probe.py"
    source = (
        "import importlib\n"
        "def f():\n"
        "    from spanjudge import engine\n"
        "    from .sessions import store\n"
        "    return importlib.import_module('spanjudge.cli'), 'spanjudge.offline:run_offline'\n"
    )
    probe.write_text(source, encoding="utf-8")
    found = {(e.target, e.kind) for e in imports_of(probe, "spanjudge.probe")}
    assert {
        ("spanjudge.engine", "import"),
        ("spanjudge.sessions.store", "import"),
        ("spanjudge.cli", "string"),
        ("spanjudge.offline", "string"),
    } <= found
    assert cycles(
        {
            ("spanjudge.a", "spanjudge.b"): Edge(source="a", target="b", line=1, kind="import"),
            ("spanjudge.b", "spanjudge.a"): Edge(source="b", target="a", line=2, kind="string"),
        }
    ) == [["spanjudge.a", "spanjudge.b"]]


def test_version_is_the_packaged_one() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert __version__ == project["version"]
    assert spanjudge.__name__ == "spanjudge"


def imported_test_modules(path: Path, package: str) -> Iterator[tuple[int, str]]:
    """Every test module (``tests/**/test_*.py``) ``path`` imports, at any level, any form:
    helpers shared by tests live in conftest.py, tests/support/ or a ``*helpers.py`` module."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            base = base[: len(base) - (node.level - 1)] if node.level else []
            module = ".".join([*base, node.module] if node.module else base)
            names = [module, *(f"{module}.{alias.name}" for alias in node.names)]
        for name in names:
            parts = name.split(".")
            target = ROOT.joinpath(*parts).with_suffix(".py")
            if parts[0] == "tests" and parts[-1].startswith("test_") and target.is_file():
                yield node.lineno, name


def test_no_test_module_imports_another_test_module() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}: {name}"
        for path in sorted((ROOT / "tests").rglob("*.py"))
        for line, name in imported_test_modules(path, ".".join(path.relative_to(ROOT).parts[:-1]))
    ]
    assert found == []


def test_the_test_import_check_sees_every_form(tmp_path: Path) -> None:
    module = tmp_path / "test_probe.py"
    module.write_text(
        "from tests.test_cli_judges import config\n"
        "from tests.sidecar import test_crash\n"
        "import tests.test_offline\n"
        "from .test_calibrate import LABELS\n"
        "def f():\n    from tests.sidecar.test_workers import _env\n"
        "from tests.support.judged import TRACES\n"  # a helper module: allowed
    )
    assert [name for _, name in imported_test_modules(module, "tests")] == [
        "tests.test_cli_judges",
        "tests.sidecar.test_crash",
        "tests.test_offline",
        "tests.test_calibrate",
        "tests.sidecar.test_workers",
    ]
