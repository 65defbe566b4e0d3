"""Related words for the heuristic judge: a request seldom repeats a skill description's words.

"Should I bring a jacket?" fits a skill for "what to wear" although the two share no word. Each
group below holds words that ask for the same kind of help; a request word matches a description
word when both are in one group. Groups are deliberately small and about everyday agent tasks:
a loose thesaurus would make every skill fit every request.
"""

from __future__ import annotations

from functools import lru_cache

from spanjudge.judges.text import stem

# One group per line: the words of a group ask for the same kind of help.
_GROUPS: tuple[str, ...] = (
    "weather forecast temperature rain rainy snow sunny wind windy storm humid humidity climate "
    "cold warm hot chilly freezing degrees celsius fahrenheit",
    "wear jacket coat umbrella clothes clothing outfit dress sweater boot layer",
    # "weak:" time words relate, but alone are no evidence (a meeting "tomorrow" is no forecast).
    "weak: forecast tomorrow tonight weekend upcoming outlook predict",
    "schedule meeting meet calendar appointment invite availability available slot reschedule",
    "email mail inbox",
    "report summary summarise summarize overview digest",
    "csv spreadsheet dataset excel",
    "changelog release",
    "incident outage alert triage postmortem downtime",
    "translate translation",
    "flight hotel trip travel itinerary",
    "expense invoice receipt reimbursement",
    "pdf document docx",
    "delete remove clean cleanup erase purge",
)


@lru_cache(maxsize=2)
def _index(strong: bool) -> dict[str, frozenset[str]]:
    index: dict[str, set[str]] = {}
    for group in _GROUPS:
        weak = group.startswith("weak:")
        if strong and weak:
            continue
        stems = {stem(word) for word in group.removeprefix("weak:").split()}
        for word in stems:
            index.setdefault(word, {word}).update(stems)
    return {word: frozenset(related) for word, related in index.items()}


def related(term: str, *, strong: bool = False) -> frozenset[str]:
    """``term`` (a stemmed token) and the words grouped with it; ``strong``: leave out the weak
    groups (time words)."""
    return _index(strong).get(term, frozenset((term,)))
