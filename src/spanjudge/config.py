"""Configuration: one YAML/JSON file, validated at start with every problem reported at once."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from spanjudge.emit.plugins import parse_emit
from spanjudge.errors import ConfigError, did_you_mean, not_utf8
from spanjudge.evaluators.base import build_evaluators
from spanjudge.expectations import (
    Rule,
    SessionEntry,
    load_expectations_file,
    parse_rules,
    yaml_problem,
)
from spanjudge.judges.registry import parse_judges
from spanjudge.recognition.declared import DeclaredRecogniser, parse_conventions, session_keys
from spanjudge.recognition.skills_dir import parse_skills
from spanjudge.sessions.store import ClosePolicy
from spanjudge.spans.limits import Limits
from spanjudge.trajectory.effects import EFFECTS, EffectMap

# parser(raw section or None, path, problems[, base=]) -> the section's value; problems get
# every error (``base=`` only for the sections in WITH_PATHS).
SectionParser = Callable[..., Any]


TOP_LEVEL = (
    "sessions",
    "expectations",
    "expectations_files",
    "evaluators",
    "judges",
    "effects",
    "limits",
    "labels",
    "serve",
    "emit",
    "skills",
    "conventions",
)


def _parse_conventions(raw: Any, path: str, problems: list[str]) -> tuple[DeclaredRecogniser, ...]:
    return () if raw is None else parse_conventions(raw, path, problems)


def _session_keys(conventions: Sequence[DeclaredRecogniser]) -> tuple[str, ...]:
    return session_keys(conventions) if conventions else ()


# Sections validated by the module that owns them, registered by that module: the core never
# imports a front end, so `serve` is validated here only once `spanjudge.sidecar.config` is
# imported (the sidecar does, before loading its configuration) and by the sidecar otherwise.
SECTION_PARSERS: dict[str, SectionParser] = {
    "judges": parse_judges,
    "skills": parse_skills,
    "conventions": _parse_conventions,
    "emit": parse_emit,
}
# Sections naming files: their parser also takes ``base=``, the directory of the configuration
# file (None without one), against which every relative path written in the file is resolved.
WITH_PATHS: set[str] = {"skills"}


def register_section(name: str, parser: SectionParser, *, paths: bool = False) -> None:
    """Let the module that owns top-level section ``name`` validate it in `parse_config`
    (``paths``: the parser takes ``base=``, see `WITH_PATHS`)."""
    if name not in TOP_LEVEL:
        raise ValueError(f"{name!r} is not a top-level configuration section ({TOP_LEVEL})")
    SECTION_PARSERS[name] = parser
    if paths:
        WITH_PATHS.add(name)


@dataclass(frozen=True, slots=True, kw_only=True)
class Config:
    policy: ClosePolicy = field(default_factory=ClosePolicy)
    rules: tuple[Rule, ...] = ()
    entries: tuple[SessionEntry, ...] = ()
    evaluators: Mapping[str, Any] = field(default_factory=dict)
    judges: Mapping[str, Any] = field(default_factory=dict)
    effects: EffectMap = field(default_factory=EffectMap)
    limits: Limits = field(default_factory=Limits)
    label_skills: tuple[str, ...] = ()
    # Metric label values: listed names always pass; up to this many others per label (agent,
    # skill) are admitted first come, the rest are reported as `other`.
    label_agents: tuple[str, ...] = ()
    max_label_values: int = 100
    # A metric series not updated for this long is dropped from the export (0: never).
    series_ttl_s: float = 3600.0
    sections: Mapping[str, Any] = field(default_factory=dict)
    source: str | None = None


def _dataclass_section(
    cls: Any, raw: Any, path: str, problems: list[str], *, also: tuple[str, ...] = (), **extra: Any
) -> Any:
    if raw is None:
        return cls(**extra)
    if not isinstance(raw, Mapping):
        problems.append(f"{path}: expected a mapping")
        return cls(**extra)
    from spanjudge.config_values import durations, setting_hint  # only for a section in the file

    known = {f.name: f for f in fields(cls)}
    raw = durations(raw, [name for name in known if name.endswith("_s")], path, problems)
    kwargs: dict[str, Any] = dict(extra)
    for key, value in raw.items():
        spec = known.get(key)
        if spec is None or key in extra:
            names = [k for k in (*known, *also) if k not in extra]
            hint = setting_hint(key, names)
            problems.append(f"{path}.{key}: unknown setting{hint} (allowed: {', '.join(names)})")
            continue
        default = getattr(cls(**extra), key)
        if isinstance(default, bool) and not isinstance(value, bool):
            problems.append(f"{path}.{key}: expected true or false, got {value!r}")
        elif isinstance(default, (int, float)) and not isinstance(default, bool):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                problems.append(f"{path}.{key}: expected a non-negative number, got {value!r}")
                continue
            kwargs[key] = (
                type(default)(value)
                if isinstance(default, int) and float(value).is_integer()
                else value
            )
        elif isinstance(default, tuple):
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                problems.append(f"{path}.{key}: expected a list of strings")
                continue
            kwargs[key] = tuple(value)
        else:
            kwargs[key] = value
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        problems.append(f"{path}: {exc}")
        return cls(**extra)


def _policy(raw: Any, problems: list[str]) -> ClosePolicy:
    raw = dict(raw) if isinstance(raw, Mapping) else raw
    extra: dict[str, Any] = {}
    if isinstance(raw, dict) and "mode" in raw:
        mode = raw.pop("mode")
        if mode not in ("session", "turn"):
            problems.append(f"sessions.mode: expected 'session' or 'turn', got {mode!r}")
        extra["per_turn"] = mode == "turn"
    policy: ClosePolicy = _dataclass_section(ClosePolicy, raw, "sessions", problems, also=("mode",))
    if not isinstance(policy.per_turn, (bool, type(None))):  # its default, None, is not a type
        problems.append(f"sessions.per_turn: expected true or false, got {policy.per_turn!r}")
    if extra:
        policy = ClosePolicy(
            **{**{f.name: getattr(policy, f.name) for f in fields(policy)}, **extra}
        )
    return policy


def _effects(raw: Any, problems: list[str]) -> EffectMap:
    """`effects: {<tool>: <effect>, ..., resource_args: [path, key, ...]}`."""
    if raw is None:
        return EffectMap()
    if not isinstance(raw, Mapping):
        problems.append("effects: expected a mapping of tool name -> effect")
        return EffectMap()
    raw = dict(raw)
    resource_args = raw.pop("resource_args", None)
    extra: dict[str, Any] = {}
    if resource_args is not None:
        if (
            isinstance(resource_args, list)
            and resource_args
            and all(isinstance(a, str) for a in resource_args)
        ):
            extra["resource_args"] = tuple(resource_args)
        else:
            problems.append(
                "effects.resource_args: expected a non-empty list of argument names "
                "(the path-like arguments that identify a resource, e.g. [path, key])"
            )
    overrides = {}
    for tool, effect in raw.items():
        if effect not in EFFECTS:
            problems.append(
                f"effects.{tool}: unknown effect {effect!r} (expected one of {', '.join(EFFECTS)})"
            )
        else:
            overrides[str(tool)] = effect
    return EffectMap(overrides=overrides, **extra)


_MIN_ATTR_CHARS = 1024


def _limits(raw: Any, problems: list[str]) -> Limits:
    limits: Limits = _dataclass_section(Limits, raw, "limits", problems)
    if limits.max_attr_chars < _MIN_ATTR_CHARS:
        # Smaller caps would cut session ids and tool arguments into meaningless stubs.
        problems.append(
            f"limits.max_attr_chars: at least {_MIN_ATTR_CHARS}, got {limits.max_attr_chars}"
        )
    return limits


_LABEL_KEYS = ("skills", "agents", "max_values", "series_ttl_s")
_SERIES_TTL_S = 3600.0


def _series_ttl(raw: Any, problems: list[str]) -> float:
    """`labels.series_ttl` (a duration) or `labels.series_ttl_s`; 0: series never expire."""
    if not isinstance(raw, Mapping):
        return _SERIES_TTL_S
    from spanjudge.config_values import DURATION_HINT, durations

    if "series_ttl" in raw and not isinstance(raw["series_ttl"], str):  # `series_ttl: 300`
        problems.append(
            "labels.series_ttl: expected a duration such as 30s, 15m, 1h (seconds as a number"
            f" go in series_ttl_s), got {raw['series_ttl']!r}"
        )
    ttl = durations(raw, ["series_ttl_s"], "labels", problems).get("series_ttl_s", _SERIES_TTL_S)
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not ttl >= 0:
        problems.append(f"labels.series_ttl_s: expected {DURATION_HINT} (0: never), got {ttl!r}")
        return _SERIES_TTL_S
    return float(ttl)


def _labels(raw: Any, problems: list[str]) -> tuple[tuple[str, ...], tuple[str, ...], int]:
    """`labels: {skills: [...], agents: [...], max_values: N, series_ttl: 1h}` (all optional)."""
    if raw is None:
        return (), (), 100
    if not isinstance(raw, Mapping):
        problems.append("labels: expected {skills: [...], agents: [...], max_values: N}")
        return (), (), 100
    for key in raw:
        if key == "series_ttl":
            continue
        if key not in _LABEL_KEYS:
            problems.append(f"labels.{key}: unknown setting (allowed: {', '.join(_LABEL_KEYS)})")
    names: dict[str, tuple[str, ...]] = {}
    for key in ("skills", "agents"):
        value = raw.get(key) or []
        if not isinstance(value, list):
            problems.append(f"labels.{key}: expected a list of names allowed as label values")
            value = []
        names[key] = tuple(str(v) for v in value)
    cap = raw.get("max_values", 100)
    if isinstance(cap, bool) or not isinstance(cap, int) or cap < 0:
        problems.append(f"labels.max_values: expected a whole number >= 0, got {cap!r}")
        cap = 100
    return names["skills"], names["agents"], cap


def parse_config(doc: Any, source: str | None = None) -> Config:
    """Validate a parsed document; raises `ConfigError` listing every problem."""
    problems: list[str] = []
    if doc is None:
        doc = {}
    if not isinstance(doc, Mapping):
        raise ConfigError("the configuration must be a mapping at the top level", source=source)
    for key in doc:
        if key not in TOP_LEVEL:
            problems.append(
                f"{key}: unknown section{did_you_mean(key, TOP_LEVEL)} "
                f"(known: {', '.join(TOP_LEVEL)})"
            )
    sessions = doc.get("sessions")
    if (
        isinstance(sessions, Mapping)
        and sessions
        and all(
            isinstance(v, Mapping) and ("skills" in v or "reference_answer" in v)
            for v in sessions.values()
        )
    ):
        problems.append(
            "sessions: this looks like an expectations file (session id -> skills); "
            "pass it with --expect, or list it under expectations_files"
        )
        sessions = None
    policy = _policy(sessions, problems)
    rules = parse_rules(doc.get("expectations"), "expectations", problems)
    entries: list[SessionEntry] = []
    files = doc.get("expectations_files") or []
    if not isinstance(files, list):
        problems.append("expectations_files: expected a list of paths")
        files = []
    # Relative paths in a file are relative to its directory (without a file: the cwd).
    base = None
    if source:
        base = Path(source).parent
    for i, name in enumerate(files):
        path = os.path.expanduser(str(name))  # `~/...` as in skills.paths and the serve files
        path = path if base is None or os.path.isabs(path) else str(base / path)
        try:
            entries.extend(load_expectations_file(path))
        except ConfigError as exc:
            problems.extend(f"expectations_files[{i}] {path}: {p}" for p in exc.problems)
    evaluators = doc.get("evaluators") or {}
    if not isinstance(evaluators, Mapping):
        problems.append("evaluators: expected a mapping of evaluator name -> options")
        evaluators = {}
    judges = doc.get("judges") or {}
    if not isinstance(judges, Mapping):
        problems.append("judges: expected a mapping of judge name -> settings")
        judges = {}
    label_skills, label_agents, max_label_values = _labels(doc.get("labels"), problems)
    series_ttl_s = _series_ttl(doc.get("labels"), problems)
    sections: dict[str, Any] = {}
    for section, parser in SECTION_PARSERS.items():
        if section in WITH_PATHS:
            sections[section] = parser(doc.get(section), section, problems, base=base)
        else:
            sections[section] = parser(doc.get(section), section, problems)
    if declared_keys := _session_keys(sections.get("conventions") or ()):
        # a declared convention's session key joins the keys the session store looks for
        keys = tuple(k for k in declared_keys if k not in policy.key_attributes)
        policy = replace(policy, key_attributes=(*policy.key_attributes, *keys))
    sections.setdefault("serve", doc.get("serve"))
    config = Config(
        policy=policy,
        rules=tuple(rules),
        entries=tuple(entries),
        evaluators=evaluators,
        judges=judges,
        effects=_effects(doc.get("effects"), problems),
        limits=_limits(doc.get("limits"), problems),
        label_skills=label_skills,
        label_agents=label_agents,
        max_label_values=max_label_values,
        series_ttl_s=series_ttl_s,
        sections=sections,
        source=source,
    )
    # Evaluator options are validated by building the evaluators once.
    build_evaluators(config.evaluators, problems)
    if problems:
        raise ConfigError(problems, source=source)
    return config


def load_config(path: str | None) -> Config:
    if path is None:
        return parse_config({})
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise ConfigError(f"cannot read configuration file: {exc.strerror}", source=path) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(not_utf8(exc), source=path) from None
    import yaml  # only when a file is read: `load_config(None)` needs no parser

    from spanjudge.config_values import load_yaml

    try:
        doc = load_yaml(text, path)
    except yaml.YAMLError as exc:
        raise ConfigError(f"not valid YAML: {yaml_problem(exc)}", source=path) from None
    return parse_config(doc, path)
