"""The ``judges`` configuration section and the per-evaluator judge lookup.

Configuration (every key but ``type`` optional unless marked required)::

    judges:
      local-llm:
        type: openai                       # any OpenAI-compatible chat-completions endpoint
        base_url: "http://127.0.0.1:8000/v1"   # required; POST {base_url}/chat/completions
        model: "qwen2.5"                   # required; verdicts say judge: llm:qwen2.5
        api_key_env: "OPENAI_API_KEY"      # env var holding the key (sent as a Bearer token)
        json_mode: true                    # ask for structured JSON output; falls back if refused
        timeout_s: 120                     # per HTTP call (a small model on a CPU is slow)
        max_retries: 3                     # on 429, 5xx, timeouts, connection resets
        backoff_s: 0.5                     # first retry delay, doubled each time (max 8 s)
        concurrency: 4                     # judgments (and calls) in flight at once, per judge
        deadline_s: 300                    # a session waits this long for its verdicts, then
                                           # the missing ones are not_evaluated/judge_timeout
        cache_size: 512                    # judgements remembered, keyed by the request
        cooldown_s: 30                     # fail fast this long after an endpoint gave up
        max_tokens: 512
        temperature: 0.0
        price: {input_per_million: 0.15, output_per_million: 0.6}   # cost in verdicts, report
        budget: {tokens_per_hour: 200000, cost_per_hour: 0.5}       # past it: judge_budget
      claude:
        type: bedrock                      # needs the extra: pip install 'spanjudge[bedrock]'
        model: "anthropic.claude-..."      # required: Bedrock model id or inference profile
        region: "us-east-1"
        profile: "my-aws-profile"          # AWS credentials profile (default chain otherwise)
        # timeout_s, max_retries, backoff_s, concurrency, deadline_s, cache_size, cooldown_s,
        # max_tokens, temperature, price, budget as above
    evaluators:
      skill_selection: {judge: local-llm}
      instruction_following: {judge: claude, pass_threshold: 0.75}
      outcome: {judge: heuristic, contains: "42"}

The built-in judge ``heuristic`` (no network) is used by ``skill_selection``, ``skill_omission``,
``instruction_following`` and ``outcome`` unless their options name another judge. A judge named
``default`` in this section replaces ``heuristic`` as that default for all four at once, and for
``goal_success`` and the custom evaluators (``evaluators.custom[i].judge``), which the heuristic
judge cannot answer (their verdicts are ``not_evaluated`` / ``no_judge`` without an LLM judge).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from spanjudge import reasons
from spanjudge.errors import ConfigError
from spanjudge.judges.budget import Budget, parse_budget, parse_price
from spanjudge.judges.heuristic import HEURISTIC
from spanjudge.registry import Registry

if TYPE_CHECKING:
    from spanjudge.judges.base import Judge, JudgeFactory, JudgeSettings
    from spanjudge.judges.reliability import CallPolicy


DEFAULT_JUDGE = "default"


def heuristic_judge(settings: Mapping[str, Any], path: str, problems: list[str]) -> Judge:
    """The embedded judge (no settings)."""
    return HEURISTIC


def openai_judge(settings: Mapping[str, Any], path: str, problems: list[str]) -> Judge:
    """Any OpenAI-compatible chat-completions endpoint; settings validated by `parse_judges`."""
    from spanjudge.judges.openai import OpenAIJudge

    rest, policy = _split_policy(settings)
    return OpenAIJudge(policy=policy, **rest)


def bedrock_judge(settings: Mapping[str, Any], path: str, problems: list[str]) -> Judge:
    """Bedrock Converse (the `bedrock` extra); settings validated by `parse_judges`."""
    from spanjudge.judges.bedrock import BedrockJudge

    rest, policy = _split_policy(settings)
    return BedrockJudge(policy=policy, **rest)


def _split_policy(settings: Mapping[str, Any]) -> tuple[dict[str, Any], CallPolicy]:
    from spanjudge.judges.reliability import CallPolicy

    rest = dict(settings)
    policy = CallPolicy(**{k: rest.pop(k) for k in list(rest) if k in CallPolicy.__slots__})
    return rest, policy


JUDGES: Registry[JudgeFactory] = Registry(
    "judge type",
    "spanjudge.judges",
    {
        "heuristic": "spanjudge.judges.registry:heuristic_judge",
        "openai": "spanjudge.judges.registry:openai_judge",
        "bedrock": "spanjudge.judges.registry:bedrock_judge",
    },
)


_POLICY_KEYS: dict[str, tuple[type, float]] = {
    # key -> (type, minimum)
    "timeout_s": (float, 0.001),
    "deadline_s": (float, 0.001),
    "max_retries": (int, 0),
    "backoff_s": (float, 0.0),
    "concurrency": (int, 1),
    "cache_size": (int, 0),
    "cooldown_s": (float, 0.0),
    "max_tokens": (int, 1),
    "temperature": (float, 0.0),
}
_KEYS: dict[str, dict[str, tuple[type, float | None]]] = {
    "heuristic": {},
    "openai": {
        "base_url": (str, None),
        "model": (str, None),
        "api_key_env": (str, None),
        "json_mode": (bool, None),
        **_POLICY_KEYS,
    },
    "bedrock": {
        "model": (str, None),
        "region": (str, None),
        "profile": (str, None),
        **_POLICY_KEYS,
    },
}
_REQUIRED = {"openai": ("base_url", "model"), "bedrock": ("model",), "heuristic": ()}
# Cost settings every networked judge takes (judges/budget.py), parsed into their values.
_COST_KEYS = ("price", "budget")


@dataclass(frozen=True, slots=True, kw_only=True)
class JudgeSpec:
    """One validated entry of the ``judges`` section."""

    name: str
    type: str
    settings: Mapping[str, Any] = field(default_factory=dict)


def _check(value: Any, kind: type, minimum: float | None) -> str | None:
    if kind is bool:
        return None if isinstance(value, bool) else "expected true or false"
    if kind is str:
        return None if isinstance(value, str) and value.strip() else "expected a non-empty string"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "expected a number"
    if kind is int and not float(value).is_integer():
        return "expected a whole number"
    if minimum is not None and value < minimum:
        return f"expected at least {minimum:g}"
    return None


def parse_judges(raw: Any, path: str, problems: list[str]) -> dict[str, JudgeSpec]:
    """Validate the ``judges`` section; every problem is appended to ``problems``."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        problems.append(f"{path}: expected a mapping of judge name -> settings")
        return {}
    specs = {}
    factories = JUDGES.checked(problems) if raw else {}
    for name, body in raw.items():
        where = f"{path}.{name}"
        if name == "heuristic":
            problems.append(f"{where}: 'heuristic' is built in; choose another name")
            continue
        if not isinstance(body, Mapping):
            problems.append(f"{where}: expected a mapping with a 'type'")
            continue
        kind = body.get("type")
        if kind not in _KEYS and isinstance(kind, str) and kind in factories:
            plugin = {k: v for k, v in body.items() if k != "type"}
            try:  # validated by building it once: third-party code reports its own problems
                factories[kind](plugin, where, problems)
            except Exception as exc:
                problems.append(f"{where}: judge type {kind} raised {type(exc).__name__}: {exc}")
            specs[str(name)] = JudgeSpec(name=str(name), type=kind, settings=plugin)
            continue
        if kind not in _KEYS:
            known = ", ".join(factories)
            problems.append(f"{where}.type: expected one of {known}, got {kind!r}")
            continue
        allowed = _KEYS[kind]
        settings: dict[str, Any] = {}
        if kind != "heuristic":
            settings.update(_cost_settings(body, where, problems))
        for key, value in body.items():
            if key == "type" or (key in _COST_KEYS and kind != "heuristic"):
                continue
            if key not in allowed:
                known = ", ".join([*allowed, *(_COST_KEYS if kind != "heuristic" else ())])
                why = (
                    f"; {' and '.join(_COST_KEYS)} apply to LLM judges (types openai, bedrock): "
                    "the heuristic judge makes no calls and costs nothing"
                    if key in _COST_KEYS
                    else ""
                )
                problems.append(
                    f"{where}.{key}: unknown setting for type {kind} (known: {known or 'none'})"
                    f"{why}"
                )
                continue
            expected, minimum = allowed[key]
            error = _check(value, expected, minimum)
            if error:
                problems.append(f"{where}.{key}: {error}, got {value!r}")
                continue
            settings[key] = int(value) if expected is int else value
        for key in _REQUIRED[kind]:
            if key not in body:
                problems.append(f"{where}.{key}: required for type {kind}")
        url = settings.get("base_url")
        if isinstance(url, str) and not url.startswith(("http://", "https://")):
            problems.append(f"{where}.base_url: expected an http:// or https:// URL, got {url!r}")
        if kind == "bedrock":
            from spanjudge.judges.bedrock import INSTALL_HINT, boto3_available

            if not boto3_available():
                problems.append(f"{where}: {INSTALL_HINT}")
        key_env = settings.get("api_key_env")
        if isinstance(key_env, str) and key_env and not os.environ.get(key_env):
            # Found now, not as judge_error verdicts on every session later.
            problems.append(
                f"{where}.api_key_env: environment variable {key_env} is unset; export it"
                " (or drop api_key_env for a server that needs no key)"
            )
        specs[str(name)] = JudgeSpec(name=str(name), type=kind, settings=settings)
    return specs


def _cost_settings(body: Mapping[str, Any], where: str, problems: list[str]) -> dict[str, Any]:

    out: dict[str, Any] = {}
    if "price" in body:
        out["price"] = parse_price(body["price"], f"{where}.price", problems)
    if "budget" in body:
        budget = out["budget"] = parse_budget(body["budget"], f"{where}.budget", problems)
        if budget is not None and budget.cost_per_hour is not None and "price" not in body:
            problems.append(
                f"{where}.budget.cost_per_hour: needs the judge's price "
                "(price: {input_per_million: X, output_per_million: Y}) to count cost"
            )
    return {k: v for k, v in out.items() if v is not None}


def budget_share(sections: Mapping[str, Any], processes: int) -> Mapping[str, Any]:
    """The parsed configuration ``sections`` one of ``processes`` evaluation processes judges
    with: each judge's hourly budget divided among them (each process counts only its own
    calls), so that the configured figures bound what serve spends whatever ``serve.workers``
    is. Sessions hash evenly over the processes, so each reaches its share about when one
    would reach the whole."""
    parsed = sections.get("judges")
    if processes <= 1 or not isinstance(parsed, Mapping):
        return sections

    shared: dict[str, Any] = {}
    for name, spec in parsed.items():
        budget = spec.settings.get("budget") if isinstance(spec, JudgeSpec) else None
        if isinstance(budget, Budget):
            tokens, cost = budget.tokens_per_hour, budget.cost_per_hour
            budget = Budget(
                tokens_per_hour=None if tokens is None else max(1, tokens // processes),
                cost_per_hour=None if cost is None else cost / processes,
            )
            spec = replace(spec, settings={**spec.settings, "budget": budget})
        shared[name] = spec
    return {**sections, "judges": shared}


def build_judge(spec: JudgeSpec, problems: list[str] | None = None) -> Judge:
    """Instantiate one judge of a validated spec; network clients are created on first use."""
    factory = JUDGES.factories()[spec.type]
    return factory(spec.settings, f"judges.{spec.name}", [] if problems is None else problems)


def judge_lookup(config: JudgeSettings) -> Callable[[str], Judge | None]:
    """Evaluator name -> its judge. Raises `ConfigError` for unknown judge references."""
    problems: list[str] = []
    parsed = config.sections.get("judges")
    if isinstance(parsed, Mapping) and all(isinstance(v, JudgeSpec) for v in parsed.values()):
        specs: Mapping[str, JudgeSpec] = parsed
    else:
        specs = parse_judges(config.judges, "judges", problems)
    judges: dict[str, Judge] = {"heuristic": HEURISTIC}
    judges.update({name: build_judge(spec, problems) for name, spec in specs.items()})
    default = judges.get(DEFAULT_JUDGE, HEURISTIC)
    chosen: dict[str, Judge] = {name: default for name in reasons.JUDGED_EVALUATORS}
    for evaluator, options in config.evaluators.items():
        ref = options.get("judge") if isinstance(options, Mapping) else None
        if ref is None:
            continue
        if not isinstance(ref, str) or ref not in judges:
            known = ", ".join(sorted(judges))
            problems.append(f"evaluators.{evaluator}.judge: unknown judge {ref!r} (known: {known})")
            continue
        chosen[str(evaluator)] = judges[ref]
    custom = config.evaluators.get(reasons.CUSTOM_SECTION)
    for i, entry in enumerate(custom if isinstance(custom, list) else ()):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            continue  # reported by the custom evaluators' own validation
        ref = entry.get("judge")
        if ref is None:
            chosen[entry["name"]] = default
        elif isinstance(ref, str) and ref in judges:
            chosen[entry["name"]] = judges[ref]
        else:
            known = ", ".join(sorted(judges))
            problems.append(f"evaluators.custom[{i}].judge: unknown judge {ref!r} (known: {known})")
    if problems:
        raise ConfigError(problems, source=config.source)
    return chosen.get
