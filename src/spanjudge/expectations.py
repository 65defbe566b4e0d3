"""What a session is required to do (ARCHITECTURE.md section 6): files, rules, span attributes."""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from spanjudge.conditions import validate_rules
from spanjudge.errors import ConfigError, did_you_mean, not_utf8
from spanjudge.patterns import PatternError, UserPattern, compile_user_pattern
from spanjudge.spans import jsonfast
from spanjudge.trajectory.model import Trajectory
from spanjudge.trajectory.reference import ReferenceTrajectory, parse_reference
from spanjudge.values import Expectation

# A session no entry, rule or span attribute speaks for: one value (frozen) for all of them.
NO_EXPECTATION = Expectation()


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionEntry:
    pattern: str
    skills: tuple[str, ...] = ()
    task: str | None = None
    reference_answer: str | None = None
    success: Mapping[str, Any] | None = None
    trajectory: ReferenceTrajectory | None = None
    # natural-language statements about the whole session, judged by goal_success
    assertions: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Rule:
    request_matches: UserPattern
    skills: tuple[str, ...] = ()
    success: Mapping[str, Any] | None = None
    trajectory: ReferenceTrajectory | None = None
    assertions: tuple[str, ...] = ()


ENTRY_KEYS = ("skills", "task", "reference_answer", "success", "trajectory", "assertions")
RULE_KEYS = ("when", "skills", "success", "trajectory", "assertions")


def _assertions(value: Any, path: str, problems: list[str]) -> tuple[str, ...]:
    """``assertions: ["a report file was saved", ...]``: each a non-empty sentence."""
    if value is None:
        return ()
    if isinstance(value, list) and all(isinstance(v, str) and v.strip() for v in value):
        return tuple(v.strip() for v in value)
    problems.append(
        f"{path}: expected a list of statements about the session "
        f'(e.g. ["a report file was saved"]), got {value!r}'
    )
    return ()


def _skills(value: Any, path: str, problems: list[str]) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(p.strip() for p in value.split(",") if p.strip())
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    problems.append(f"{path}: expected a list of skill names, got {value!r}")
    return ()


def _text(value: Any, path: str, problems: list[str]) -> str | None:
    if value is None or isinstance(value, str):
        return value
    problems.append(f"{path}: expected text, got {value!r}")
    return None


def _success(value: Any, path: str, problems: list[str]) -> Mapping[str, Any] | None:
    """A success condition (contains / regex / json_path + equals), checked at load time."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        problems.append(
            f"{path}: expected {{contains: ...}}, {{regex: ...}} or {{json_path, equals}}"
        )
        return None
    validate_rules(value, path, problems)
    return value


def parse_entries(doc: Any, source: str) -> list[SessionEntry]:
    """Validate an expectations document; every problem is reported at once."""
    problems: list[str] = []
    if not isinstance(doc, Mapping) or not isinstance(doc.get("sessions"), Mapping):
        raise ConfigError(
            "expected an object with a 'sessions' mapping: "
            '{"sessions": {"<session id or glob>": {"skills": [...]}}}',
            source=source,
        )
    for key in doc:
        if key != "sessions":
            problems.append(f"{key}: unknown key (an expectations file has only 'sessions')")
    entries = []
    for pattern, body in doc["sessions"].items():
        path = f"sessions.{pattern}"
        if not isinstance(body, Mapping):
            problems.append(f"{path}: expected an object with {'/'.join(ENTRY_KEYS)}")
            continue
        for key in body:
            if key not in ENTRY_KEYS:
                hint = did_you_mean(key, ENTRY_KEYS)
                problems.append(
                    f"{path}.{key}: unknown key{hint} (allowed: {', '.join(ENTRY_KEYS)})"
                )
        entries.append(
            SessionEntry(
                pattern=str(pattern),
                skills=_skills(body.get("skills"), f"{path}.skills", problems),
                task=_text(body.get("task"), f"{path}.task", problems),
                reference_answer=_text(
                    body.get("reference_answer"), f"{path}.reference_answer", problems
                ),
                success=_success(body.get("success"), f"{path}.success", problems),
                trajectory=parse_reference(body.get("trajectory"), f"{path}.trajectory", problems),
                assertions=_assertions(body.get("assertions"), f"{path}.assertions", problems),
            )
        )
    if problems:
        raise ConfigError(problems, source=source)
    return entries


def load_expectations_file(path: str) -> list[SessionEntry]:
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise ConfigError(f"cannot read expectations file: {exc.strerror}", source=path) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(not_utf8(exc), source=path) from None
    from spanjudge.config_values import load_yaml

    try:
        doc = jsonfast.parse(text) if path.endswith(".json") else load_yaml(text, path)
    except ValueError as exc:
        raise ConfigError(f"not valid JSON: {exc}", source=path) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"not valid YAML: {yaml_problem(exc)}", source=path) from None
    return parse_entries(doc, path)


def load_expectations_files(paths: Sequence[str]) -> list[SessionEntry]:
    """Every file's entries together (``--expect A --expect B``). A pattern that two files set
    differently is an error naming both: which file should win is not ours to guess."""
    merged: dict[str, tuple[SessionEntry, str]] = {}
    problems = []
    for path in paths:
        for entry in load_expectations_file(path):
            before = merged.get(entry.pattern)
            if before is None:
                merged[entry.pattern] = (entry, path)
            elif before[0] != entry:
                problems.append(
                    f"sessions.{entry.pattern}: set differently in {before[1]} and {path}"
                    " (keep it in one file, or make both say the same)"
                )
    if problems:
        raise ConfigError(problems, source=" and ".join(dict.fromkeys(paths)))
    return [entry for entry, _ in merged.values()]


def yaml_problem(exc: Exception) -> str:
    """A YAML error as `line L, column C: problem` (PyYAML's text names '<unicode string>')."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    if mark is not None:
        return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"
    return str(problem)


def parse_rules(raw: Any, path: str, problems: list[str]) -> list[Rule]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        problems.append(f"{path}: expected a list of rules")
        return []
    rules = []
    for i, item in enumerate(raw):
        where = f"{path}[{i}]"
        when = item.get("when") if isinstance(item, Mapping) else None
        regex = when.get("request_matches") if isinstance(when, Mapping) else None
        if not isinstance(regex, str):
            problems.append(f"{where}.when.request_matches: required, a regular expression")
            continue
        try:
            compiled = compile_user_pattern(regex, ignore_case=True)
        except PatternError as exc:
            problems.append(f"{where}.when.request_matches: invalid regex {regex!r}: {exc}")
            continue
        for key in item:
            if key not in RULE_KEYS:
                hint = did_you_mean(key, RULE_KEYS)
                allowed = ", ".join(RULE_KEYS)
                problems.append(f"{where}.{key}: unknown key{hint} (allowed: {allowed})")
        rules.append(
            Rule(
                request_matches=compiled,
                skills=_skills(item.get("skills"), f"{where}.skills", problems),
                success=_success(item.get("success"), f"{where}.success", problems),
                trajectory=parse_reference(item.get("trajectory"), f"{where}.trajectory", problems),
                assertions=_assertions(item.get("assertions"), f"{where}.assertions", problems),
            )
        )
    return rules


TASK_PREFIX = "task:"


def _is_task(pattern: str) -> bool:
    return pattern.startswith(TASK_PREFIX)


class ExpectationResolver:
    """Merges the three sources; exact session ids beat globs, all skills are unioned."""

    def __init__(self, entries: Sequence[SessionEntry] = (), rules: Sequence[Rule] = ()) -> None:
        self.entries = list(entries)
        # "task:<id>" keys apply to every session (run) of that task.
        self.tasks = {e.pattern[len(TASK_PREFIX) :]: e for e in entries if _is_task(e.pattern)}
        named = [e for e in entries if not _is_task(e.pattern)]
        self.exact = {e.pattern: e for e in named if not any(c in e.pattern for c in "*?[")}
        self.globs = [e for e in named if e.pattern not in self.exact]
        self.rules = list(rules)

    def resolve(self, trajectory: Trajectory) -> Expectation:
        skills: list[str] = []
        sources: list[str] = []
        task = reference = None
        success: Mapping[str, Any] | None = None
        calls: ReferenceTrajectory | None = None
        assertions: list[str] = []

        def add(names: Sequence[str], source: str) -> None:
            if names and source not in sources:
                sources.append(source)
            for name in names:
                if name not in skills:
                    skills.append(name)

        matched = [self.exact[trajectory.session_id]] if trajectory.session_id in self.exact else []
        matched += [g for g in self.globs if fnmatch.fnmatchcase(trajectory.session_id, g.pattern)]
        if trajectory.task_id and trajectory.task_id in self.tasks:
            matched.append(self.tasks[trajectory.task_id])
        if not matched and not self.rules and not trajectory.expected_skills_attr:
            return NO_EXPECTATION  # what the steps below build from nothing, made once
        for entry in matched:
            add(entry.skills, "expectations_file")
            task = task or entry.task
            reference = reference or entry.reference_answer
            success = success or entry.success
            calls = calls or entry.trajectory
            assertions.extend(a for a in entry.assertions if a not in assertions)
            if entry.assertions and "expectations_file" not in sources:
                sources.append("expectations_file")
        request = trajectory.request or ""
        for rule in self.rules:
            if rule.request_matches.search(request):
                add(rule.skills, "config_rule")
                success = success or rule.success
                calls = calls or rule.trajectory
                assertions.extend(a for a in rule.assertions if a not in assertions)
                if rule.assertions and "config_rule" not in sources:
                    sources.append("config_rule")
        add(trajectory.expected_skills_attr, "span_attribute")
        return Expectation(
            skills=tuple(skills),
            task=task,
            reference_answer=reference,
            success=success,
            sources=tuple(sources),
            trajectory=calls,
            assertions=tuple(assertions),
        )
