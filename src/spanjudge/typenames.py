"""Names a module binds for type checkers only, given at run time when someone asks for them.

`spanjudge eval` imports no `typing` (start-up, `bench/bench_startup.py`): a module imports
`Any`, builds its `Literal` aliases (`values.Outcome`, `trajectory.steps.StepKind`, ...) and names
the extension Protocols (`evaluators.base.Evaluator`, ...) inside ``if TYPE_CHECKING:``, with
``TYPE_CHECKING = False``. What such a block binds stays available to code that asks at run time:

- `module_getattr(__name__)` is a module's ``__getattr__`` (PEP 562): ``from spanjudge.values
  import Outcome`` runs the module's ``if TYPE_CHECKING:`` blocks once (importing `typing` then)
  and gives what they bound; a name they do not bind is refused from their text, unrun;
- `type_hints(cls)` is `typing.get_type_hints` for a class of spanjudge's (a record), whose
  annotations name those names: the module's globals do not hold them, so the plain function
  raises `NameError` there.
"""

from __future__ import annotations

import sys
from _thread import RLock  # = threading.RLock, without importing threading

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

_found: dict[str, dict[str, Any]] = {}  # module -> what its type-checking blocks bind
_lock = RLock()  # one run per module: every thread gets the same objects (a Protocol class)
_running: set[str] = set()


def type_checking_names(module: str) -> dict[str, Any]:
    """What the top-level ``if TYPE_CHECKING:`` blocks of ``module`` (imported) bind that the
    module itself does not, from running them once on a copy of its globals. Empty when they
    cannot be run (no source, a block that fails, a dependency missing), and for a nested ask
    while they run."""
    found = _found.get(module)
    if found is not None:
        return found
    with _lock:
        found = _found.get(module)
        if found is None:
            if module in _running:  # a nested ask while they run (the lock is re-entrant)
                return {}
            _running.add(module)
            try:
                found = _found[module] = _run_blocks(module)
            finally:
                _running.discard(module)
    return found


def _run_blocks(module: str) -> dict[str, Any]:
    namespace = vars(sys.modules[module])
    scratch = dict(namespace)
    block, _ = _read_blocks(module)
    try:
        exec(compile(block, namespace.get("__file__") or module, "exec"), scratch)
    except Exception:  # the source changed, or a block's import fails: no names
        return {}
    return {k: v for k, v in scratch.items() if k not in namespace}


_read: dict[str, tuple[Any, frozenset[str]]] = {}  # module -> its blocks as one ast.Module, names


def _read_blocks(module: str) -> tuple[Any, frozenset[str]]:
    """The statements of ``module``'s top-level type-checking blocks, and every name they could
    bind, read from its source without running them: a name no block binds is answered without
    running anything (`hasattr` probes; one block imports the OTel metrics API)."""
    found = _read.get(module)
    if found is None:
        import ast

        get_source = getattr(vars(sys.modules[module]).get("__loader__"), "get_source", None)
        try:
            source = get_source(module) if get_source is not None else None
            tree = ast.parse(source or "")
        except Exception:  # the source is gone (an upgrade in place) or unreadable: no names
            tree = ast.Module(body=[], type_ignores=[])
        body = [
            statement
            for node in tree.body
            if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING"
            for statement in node.body
        ]
        names: set[str] = set()
        for node in (n for statement in body for n in ast.walk(statement)):
            if isinstance(node, ast.alias):
                names.add((node.asname or node.name).partition(".")[0])
            elif isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
        found = _read[module] = (ast.Module(body=body, type_ignores=[]), frozenset(names))
    return found


def module_getattr(module: str) -> Callable[[str], Any]:
    """A ``__getattr__`` for ``module`` giving the names its type-checking blocks bind."""

    def __getattr__(name: str) -> Any:
        # an import-system probe (`__path__`, ...) is no type name
        if not name.startswith("__") and name in _read_blocks(module)[1]:
            found = type_checking_names(module)
            if name in found:
                return found[name]
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__


def type_hints(cls: type) -> dict[str, Any]:
    """`typing.get_type_hints(cls)` for a class defined in a spanjudge module, with the names
    that module binds for type checkers only."""
    import typing

    module = cls.__module__
    names = {**type_checking_names(module), **vars(sys.modules[module])}
    return typing.get_type_hints(cls, globalns=names)
