"""Third-party sinks: the ``emit`` configuration section and the `spanjudge.sinks` entry points.

::

    emit:
      sinks:
        console: {}                     # built in: one line per session on stderr
        my_sink: {url: "https://..."}   # a factory registered in the `spanjudge.sinks` group

or, with no options, a list: ``sinks: [console]``.

Every front end's `Pipeline` adds the configured sinks to its own (OTLP spans and logs, metrics,
the report), so a plugin sink sees every evaluated session whichever front end evaluated it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from spanjudge.emit.console import NAME as CONSOLE
from spanjudge.emit.console import ConsoleSink
from spanjudge.errors import did_you_mean
from spanjudge.registry import Registry

if TYPE_CHECKING:
    from spanjudge.emit.base import Sink, SinkFactory


# The built-in sinks need the front end's providers, so the front ends build them; plugins and
# the console sink (which needs nothing) only.
SINKS: Registry[SinkFactory] = Registry("sink", "spanjudge.sinks", {})
_KEYS = ("sinks",)


@dataclass(frozen=True, slots=True, kw_only=True)
class EmitSettings:
    """The validated ``emit`` section: plugin sink name -> its options, in configured order."""

    sinks: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


def parse_emit(raw: Any, path: str, problems: list[str]) -> EmitSettings:
    """Validate the ``emit`` section; every problem is appended to ``problems``."""
    if raw is None:
        return EmitSettings()
    if not isinstance(raw, Mapping):
        problems.append(f"{path}: expected a mapping with 'sinks'")
        return EmitSettings()
    for key in raw:
        if key not in _KEYS:
            problems.append(
                f"{path}.{key}: unknown setting{did_you_mean(key, _KEYS)} (allowed: sinks)"
            )
    sinks = raw.get("sinks") or {}
    if isinstance(sinks, list) and all(isinstance(name, str) for name in sinks):
        sinks = dict.fromkeys(sinks)
    if not isinstance(sinks, Mapping):
        problems.append(
            f"{path}.sinks: expected a mapping of sink name -> options, or a list of names"
        )
        return EmitSettings()
    plugins = SINKS.checked(problems) if set(sinks) - {CONSOLE} else {}
    known = [CONSOLE, *plugins]
    chosen: dict[str, Mapping[str, Any]] = {}
    for name, options in sinks.items():
        where = f"{path}.sinks.{name}"
        if name == CONSOLE and options:
            problems.append(f"{where}: takes no options")
        elif name not in known:
            names = ", ".join(sorted(plugins)) or "none installed"
            problems.append(
                f"{where}: unknown sink{did_you_mean(name, known)} (plugins in the "
                f"{SINKS.group} entry-point group: {names})"
            )
        elif options is not None and not isinstance(options, Mapping):
            problems.append(f"{where}: expected a mapping of options")
        else:
            chosen[str(name)] = dict(options or {})
    return EmitSettings(sinks=chosen)


def configured_sinks(settings: EmitSettings, problems: list[str]) -> list[Sink]:
    """Build the plugin sinks ``settings`` names; a factory that raises is a problem."""
    if not settings.sinks:
        return []
    factories = SINKS.checked(problems) if set(settings.sinks) - {CONSOLE} else {}
    built: list[Sink] = []
    for name, options in settings.sinks.items():
        where = f"emit.sinks.{name}"
        if name == CONSOLE:
            built.append(ConsoleSink())
            continue
        try:
            built.append(factories[name](options, where, problems))
        except Exception as exc:  # third-party code: a configuration problem, not a traceback
            problems.append(f"{where}: the plugin's factory raised {type(exc).__name__}: {exc}")
    return built
