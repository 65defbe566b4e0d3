"""Success conditions: the grammar shared by expectations (`success:`) and the `outcome`
evaluator's options (ARCHITECTURE.md section 6). All rules given must hold::

    {contains: "42"}                      # or a list: every string must appear
    {regex: "total: \\d+"}                # searched for, on RE2 (`spanjudge.patterns`)
    {json_path: "$.total", equals: 42}    # the answer (or its JSON block) parsed as JSON
    {contains: "Paris", ignore_case: false}   # contains/regex ignore case by default
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from spanjudge.errors import unknown_options
from spanjudge.patterns import PatternError, compile_user_pattern
from spanjudge.spans import jsonfast

RULE_KEYS = ("contains", "regex", "json_path", "equals", "ignore_case")
# The keys that make a condition (the others qualify them).
CONDITION_KEYS = ("contains", "regex", "json_path")
_PATH_PART = re.compile(r"\.?([^.\[\]]+)|\[(\d+)\]")
_MISSING = object()


def validate_rules(rules: Mapping[str, Any], path: str, problems: list[str]) -> None:
    """Report every problem of one rule set (evaluator options or an expectation's success)."""
    unknown_options(rules, RULE_KEYS, path, problems)
    contains = rules.get("contains")
    if contains is not None and not (
        isinstance(contains, str)
        or (isinstance(contains, list) and contains and all(isinstance(c, str) for c in contains))
    ):
        problems.append(f"{path}.contains: expected a string or a list of strings")
    regex = rules.get("regex")
    if regex is not None and not isinstance(regex, str):
        problems.append(f"{path}.regex: expected a regular expression string")
    elif isinstance(regex, str):
        try:
            compile_user_pattern(regex)
        except PatternError as exc:
            problems.append(f"{path}.regex: invalid regular expression {regex!r}: {exc}")
    json_path = rules.get("json_path")
    if json_path is not None and (not isinstance(json_path, str) or not json_path.strip()):
        problems.append(f"{path}.json_path: expected a path such as $.result.total")
    if (json_path is None) != ("equals" not in rules):
        problems.append(f"{path}: json_path and equals go together")
    if not isinstance(rules.get("ignore_case", True), bool):
        problems.append(f"{path}.ignore_case: expected true or false")


def _json_in(text: str) -> Any:
    candidates = [text.strip()]
    fence = re.search(r"```(?:json)?\s*\n(.*?)\n\s*```", text, re.DOTALL)
    if fence:
        candidates.append(fence.group(1))
    starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    if starts:
        start = min(starts)
        end = max(text.rfind("}"), text.rfind("]"))
        candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            return jsonfast.parse(candidate)
        except ValueError:  # not JSON, or nested too deep to read
            continue
    return _MISSING


def _lookup(doc: Any, path: str) -> Any:
    current = doc
    for name, index in _PATH_PART.findall(path.strip().removeprefix("$")):
        if index:
            if not isinstance(current, list) or int(index) >= len(current):
                return _MISSING
            current = current[int(index)]
        elif isinstance(current, list) and name.isdigit() and int(name) < len(current):
            current = current[int(name)]
        elif isinstance(current, Mapping) and name in current:
            current = current[name]
        else:
            return _MISSING
    return current


def check_rules(rules: Mapping[str, Any], answer: str) -> tuple[bool, list[str]]:
    """Apply every rule; returns (all held, one line per rule saying what was checked)."""
    flags = re.IGNORECASE if rules.get("ignore_case", True) else 0
    results: list[tuple[bool, str]] = []
    contains = rules.get("contains")
    for needle in [contains] if isinstance(contains, str) else contains or []:
        found = re.search(re.escape(needle), answer, flags) is not None
        results.append((found, f"contains {needle!r}: {'yes' if found else 'no'}"))
    if isinstance(rules.get("regex"), str):
        # validated at load; RE2 keeps its own cache of compiled patterns
        compiled = compile_user_pattern(rules["regex"], ignore_case=bool(flags))
        found = compiled.search(answer) is not None
        results.append((found, f"matches /{rules['regex']}/: {'yes' if found else 'no'}"))
    if isinstance(rules.get("json_path"), str):
        doc = _json_in(answer)
        want = rules.get("equals")
        if doc is _MISSING:
            results.append((False, f"{rules['json_path']} == {want!r}: the answer is not JSON"))
        else:
            got = _lookup(doc, rules["json_path"])
            ok = got is not _MISSING and got == want
            shown = "missing" if got is _MISSING else json.dumps(got)
            results.append((ok, f"{rules['json_path']} == {json.dumps(want)}: got {shown}"))
    return all(ok for ok, _ in results), [line for _, line in results]
