"""One registry type for every extension point (ARCHITECTURE.md section 13).

A `Registry` holds the built-in factories of one kind (evaluators, recognisers, judges, sinks) by
name, as ``"module:attribute"`` targets imported when first called, plus the factories third-party
distributions declare in the kind's entry-point group (`importlib.metadata.entry_points`, so a
plugin is found in any form it was installed in).

A plugin that cannot be imported, or that takes the name of a built-in or of another plugin, is a
`ConfigError` naming the plugin, its distribution and the group: never a traceback, never a
plugin silently ignored.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from importlib import import_module
from importlib.metadata import entry_points
from typing import Any, Generic, TypeVar

from spanjudge.errors import ConfigError

F = TypeVar("F")


def load_target(target: str) -> Any:
    """The object a ``"module:attr.attr"`` target names."""
    module_name, _, attr = target.partition(":")
    obj: Any = import_module(module_name)
    for part in attr.split(".") if attr else ():
        obj = getattr(obj, part)
    return obj


class _Builtin:
    """A built-in factory, imported when first called: a registry hands out every name, and a
    builder calls only what it builds (an opt-in evaluator left off, a judge type not configured
    costs no import)."""

    __slots__ = ("_factory", "target")

    def __init__(self, target: str) -> None:
        self.target = target
        self._factory: Any = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._factory is None:
            self._factory = load_target(self.target)
        return self._factory(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<built-in factory {self.target}>"


class Registry(Generic[F]):
    """Built-in factories of one ``kind`` by name, then the plugins of entry-point ``group``.

    ``F`` is the kind's factory Protocol (for example `EvaluatorFactory`); the registry checks
    only that a plugin's object is callable, the kind's builder calls it.
    """

    def __init__(self, kind: str, group: str, builtins: Mapping[str, str]) -> None:
        self.kind = kind
        self.group = group
        self.builtins = dict(builtins)
        self._builtins: dict[str, Any] = {n: _Builtin(t) for n, t in self.builtins.items()}
        self._loaded: dict[str, F] | None = None
        self._plugins: list[str] = []
        self._path: tuple[str, ...] = ()

    def factories(self) -> dict[str, F]:
        """name -> factory: built-ins in their order, then plugins by name. Loaded once per
        `sys.path` (a distribution installed on a new path entry is found)."""
        path = tuple(sys.path)
        if self._loaded is None or path != self._path:
            loaded: dict[str, F] = dict(self._builtins)
            plugins = self._load_plugins(loaded)
            self._plugins = sorted(plugins)
            loaded.update((name, plugins[name]) for name in self._plugins)
            self._loaded, self._path = loaded, path
        return dict(self._loaded)

    def checked(self, problems: list[str]) -> dict[str, F]:
        """`factories`, with plugin problems appended to ``problems`` (built-ins still load)."""
        try:
            return self.factories()
        except ConfigError as exc:
            problems.extend(exc.problems)
            return dict(self._builtins)

    def plugin_names(self) -> list[str]:
        """Names that came from entry points (after `factories`)."""
        self.factories()
        return list(self._plugins)

    def _load_plugins(self, builtins: Mapping[str, F]) -> dict[str, F]:
        found: dict[str, F] = {}
        origin: dict[str, str] = {}
        problems: list[str] = []
        for ep in entry_points(group=self.group):
            dist = getattr(ep.dist, "name", None) or "an unknown distribution"
            where = (
                f"plugin {ep.name!r} ({ep.value}, from {dist}) in entry-point group {self.group}"
            )
            if ep.name in builtins:
                problems.append(f"{where}: a built-in {self.kind} has that name; rename the plugin")
                continue
            if ep.name in found:
                problems.append(f"{where}: {origin[ep.name]} registers the same name")
                continue
            try:
                factory = ep.load()
            except Exception as exc:  # any import-time failure of third-party code
                problems.append(f"{where}: cannot be loaded: {type(exc).__name__}: {exc}")
                continue
            if not callable(factory):
                problems.append(f"{where}: is not callable (expected a {self.kind} factory)")
                continue
            found[ep.name] = factory
            origin[ep.name] = dist
        if problems:
            raise ConfigError(problems)
        return found
