"""Entry points of one group, without importing `importlib.metadata` when nothing declares it.

Every run looks for third-party plugins, and almost every run finds none. `importlib.metadata`
costs a CLI start-up about a third of Python's own (it imports `email`, `zipfile`, `csv`) before
it reads a single file, so the installed distributions' `entry_points.txt` files are first
scanned for group headers, once per `sys.path` for every registry. Only when one names the
group, or when something on `sys.path` or `sys.meta_path` is not a plain directory / the
standard finder (a zip, an egg, a custom finder), is `importlib.metadata` asked, and its
answer is the one returned.
"""

from __future__ import annotations

import functools
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_METADATA_SUFFIXES = (".dist-info", ".egg-info")


def _standard_finders_only() -> bool:
    for finder in sys.meta_path:
        if not hasattr(finder, "find_distributions"):
            continue
        # The standard PathFinder (and setuptools' editable finders, which keep their
        # metadata in site-packages) read the directories scanned below.
        module = getattr(finder, "__module__", "") or type(finder).__module__
        if module not in ("importlib._bootstrap_external", "_frozen_importlib_external") and (
            not module.startswith("__editable__")
        ):
            return False
    return True


def _declared_somewhere(group: str) -> bool:
    """Whether any distribution on `sys.path` may declare ``group`` (True when unsure)."""
    if not _standard_finders_only():
        return True
    groups = _declared_groups(tuple(sys.path))
    return groups is None or group in groups


@functools.lru_cache(maxsize=8)
def _declared_groups(path: tuple[str, ...]) -> frozenset[str] | None:
    """Every entry-point group named in an `entry_points.txt` on ``path`` (one scan per
    `sys.path`, shared by every registry), or None when something there cannot be scanned."""
    groups: set[str] = set()
    for entry in path:
        directory = entry or "."
        if not os.path.isdir(directory):
            if os.path.exists(directory):
                return None  # a zip or an egg: leave it to importlib.metadata
            continue
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for name in names:
            if not name.endswith(_METADATA_SUFFIXES):
                continue
            file = os.path.join(directory, name, "entry_points.txt")
            try:
                with open(file, encoding="utf-8", errors="replace") as handle:
                    text = handle.read()
            except (FileNotFoundError, NotADirectoryError):
                continue
            except OSError:
                return None
            groups.update(
                line.strip()[1:-1]
                for line in text.splitlines()
                if line.strip().startswith("[") and line.strip().endswith("]")
            )
    return frozenset(groups)


def entry_points(group: str) -> tuple[Any, ...]:
    """`importlib.metadata.entry_points(group=group)`, skipped when no distribution has it."""
    if not _declared_somewhere(group):
        return ()
    from importlib.metadata import entry_points as lookup

    return tuple(lookup(group=group))
