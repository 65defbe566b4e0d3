"""Answers remembered for texts that repeat, within a bound on the characters held.

Keys and names from traces have no length limit and attribute values may be 64 KiB, while a
cache keeps what it holds after the sessions that brought it are gone: bounded by a count of
entries alone, long texts would make it hold many megabytes outside every memory budget.

- `remembered_when_short`: `functools.lru_cache` for a function of a name that repeats (an
  attribute key, a span or tool name, a verdict's label), which passes a long text through
  uncached. The names that repeat are short, so caching only those keeps the gain.
- `remembered_within`: for a function of a text that may be long and still repeats (a system
  prompt, tool definitions, the messages every model call of a session carries again): short
  texts as `remembered_when_short` does, and long ones until they come to `TEXT_CHARS`, the
  oldest forgotten first.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, TypeVar, cast

SHORT_CHARS = 256  # texts up to this long are remembered
TEXT_CHARS = 1 << 18  # characters of long texts a `remembered_within` cache holds
TEXT_ENTRIES = 1024  # answers it holds for short texts, and for long ones

_F = TypeVar("_F", bound=Callable[..., Any])


def remembered_when_short(maxsize: int) -> Callable[[_F], _F]:
    """Cache a function whose last argument is the text (``maxsize`` answers), unless that text
    is over `SHORT_CHARS` characters; its other arguments must be hashable."""

    def decorate(function: _F) -> _F:
        remembered = functools.lru_cache(maxsize=maxsize)(function)

        @functools.wraps(function)
        def call(*args: Any) -> Any:
            if len(args[-1]) > SHORT_CHARS:
                return function(*args)
            return remembered(*args)

        return cast(_F, call)

    return decorate


def remembered_within(
    max_chars: int = TEXT_CHARS, max_entries: int = TEXT_ENTRIES
) -> Callable[[_F], _F]:
    """Cache a function whose first argument is a text, a tuple of texts, or None. Up to
    `SHORT_CHARS` characters, ``max_entries`` answers are remembered (`functools.lru_cache`);
    longer texts are remembered while they come to at most ``max_chars`` characters and
    ``max_entries`` answers, the oldest forgotten first (a text over ``max_chars`` alone is not
    remembered). Its other arguments must be hashable; the texts among them (strings, and the
    strings of a tuple) count with the first one. Callers never change what it returns."""

    def decorate(function: _F) -> _F:
        short = functools.lru_cache(maxsize=max_entries)(function)
        answers: OrderedDict[Any, tuple[Any, int]] = OrderedDict()  # long texts, oldest first
        held = 0  # characters of the texts in `answers`
        lock = threading.Lock()  # for changes: a lookup is one dict operation

        @functools.wraps(function)
        def call(text: str | tuple[str, ...] | None, *args: Any, **kwargs: Any) -> Any:
            nonlocal held
            size = len(text) if isinstance(text, str) else _chars((text,))
            if args:
                size += _chars(args)
            if size <= SHORT_CHARS:
                return short(text, *args, **kwargs)
            key = (text, args, tuple(kwargs.items())) if args or kwargs else text
            known = answers.get(key)
            if known is not None:
                return known[0]
            answer = function(text, *args, **kwargs)
            if size > max_chars:
                return answer
            with lock:
                if key not in answers:
                    answers[key] = (answer, size)
                    held += size
                    while held > max_chars or len(answers) > max_entries:
                        held -= answers.popitem(last=False)[1][1]
            return answer

        return cast(_F, call)

    return decorate


def _chars(args: tuple[Any, ...]) -> int:
    """The characters of the texts among ``args``: strings, and the strings of tuples."""
    n = 0
    for arg in args:
        if isinstance(arg, str):
            n += len(arg)
        elif isinstance(arg, tuple):
            n += sum(len(item) for item in arg if isinstance(item, str))
    return n
