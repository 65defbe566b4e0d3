"""`LazyPattern` answers as `re.compile` does, and compiles only when first used."""

from __future__ import annotations

import re

import pytest

from spanjudge.lazy_re import LazyPattern

TEXT = "Read ./docs/a.md, then 12 files; READ b.txt"
CASES = [
    (r"(\w+)\.(md|txt)", 0),
    (r"read", re.IGNORECASE),
    (r"^\s*$", re.MULTILINE),
    (r"\d+", 0),
]


@pytest.mark.parametrize(("pattern", "flags"), CASES)
def test_every_method_gives_what_the_compiled_pattern_gives(pattern: str, flags: int) -> None:
    lazy, real = LazyPattern(pattern, flags), re.compile(pattern, flags)
    for _ in range(2):  # before and after the first use put the compiled methods in place
        assert repr(lazy.search(TEXT)) == repr(real.search(TEXT))
        assert repr(lazy.search(TEXT, 5)) == repr(real.search(TEXT, 5))
        assert repr(lazy.match(TEXT)) == repr(real.match(TEXT))
        assert repr(lazy.fullmatch("12")) == repr(real.fullmatch("12"))
        assert lazy.findall(TEXT) == real.findall(TEXT)
        assert [m.span() for m in lazy.finditer(TEXT)] == [m.span() for m in real.finditer(TEXT)]
        assert lazy.sub("<\\g<0>>", TEXT) == real.sub("<\\g<0>>", TEXT)
        assert lazy.sub(lambda m: m.group(0).upper(), TEXT, 1) == real.sub(
            lambda m: m.group(0).upper(), TEXT, 1
        )
        assert lazy.subn("_", TEXT) == real.subn("_", TEXT)
        assert lazy.split(TEXT, 1) == real.split(TEXT, 1)
    assert (lazy.pattern, lazy.flags, lazy.groups) == (real.pattern, real.flags, real.groups)


def test_a_pattern_is_compiled_on_first_use_only() -> None:
    lazy = LazyPattern(r"(unclosed")  # a bad pattern: compiling it raises
    assert lazy.pattern == "(unclosed"
    with pytest.raises(re.error):
        lazy.search("x")


def test_every_module_pattern_in_spanjudge_compiles() -> None:
    # Compiled on first use, a typo in a rarely used recogniser's pattern would pass every import
    # and fail in production on the first span that reaches it: compile them all here.
    import importlib
    import pkgutil

    import spanjudge

    patterns = {}
    for module in pkgutil.walk_packages(spanjudge.__path__, "spanjudge."):
        if module.name.endswith("__main__"):  # `python -m` entry points run when imported
            continue
        for name, value in vars(importlib.import_module(module.name)).items():
            if isinstance(value, LazyPattern):
                patterns[f"{module.name}.{name}"] = value
    assert len(patterns) > 50  # the recognisers', judges' and conditions' patterns
    failures = {}
    for where, lazy in patterns.items():
        try:
            re.compile(lazy.pattern, lazy._flags)
        except re.error as exc:
            failures[where] = str(exc)
    assert failures == {}
