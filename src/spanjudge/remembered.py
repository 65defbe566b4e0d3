"""Answers remembered for short texts only: `functools.lru_cache` for a function of a text that
repeats (an attribute key, a span or tool name, a verdict's label), which passes a long text
through uncached.

Keys and names from traces have no length limit and attribute values may be 64 KiB, while a
cache keeps what it holds after the sessions that brought it are gone: bounded by a count of
entries alone, long texts would make it hold many megabytes outside every memory budget. The
names that repeat are short, so caching only those keeps the gain.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar, cast

SHORT_CHARS = 256  # texts up to this long are remembered

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
