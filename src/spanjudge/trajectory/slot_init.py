"""A faster ``__init__`` for the frozen, slotted dataclasses built once or more per span.

A frozen dataclass's generated ``__init__`` stores each field through
``object.__setattr__(self, name, value)``; calling the slot's own descriptor does the same
store in about half the time, which is most of the cost of a `Step` (32 fields, several per
span, and every ``dataclasses.replace`` builds one more). `faster_init` generates that
``__init__`` with the same keyword-only parameters, defaults, default factories and errors,
so the class behaves as before (it stays frozen: assignment after construction still raises).
"""

from __future__ import annotations

import dataclasses
from typing import Any

_FACTORY = object()  # stands for "not given" where a field has a default factory


def faster_init(cls: type) -> type:
    """Give dataclass ``cls`` (frozen, ``slots=True``, ``kw_only=True``, every field in
    ``__init__``, no ``InitVar``) a descriptor-storing ``__init__`` that ends with its
    ``__post_init__`` when it has one, as the generated one does; returns ``cls``."""
    params = dataclasses.fields(cls)
    assert cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
    assert "__slots__" in cls.__dict__
    assert all(f.init and f.kw_only for f in params)
    env: dict[str, Any] = {"_FACTORY": _FACTORY}
    signature, body = [], []
    for i, f in enumerate(params):
        env[f"_set{i}"] = cls.__dict__[f.name].__set__
        if f.default is not dataclasses.MISSING:
            env[f"_default{i}"] = f.default
            signature.append(f"{f.name}=_default{i}")
        elif f.default_factory is not dataclasses.MISSING:
            env[f"_factory{i}"] = f.default_factory
            signature.append(f"{f.name}=_FACTORY")
            body.append(f"    if {f.name} is _FACTORY:\n        {f.name} = _factory{i}()")
        else:
            signature.append(f.name)
        body.append(f"    _set{i}(self, {f.name})")
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    source = f"def __init__(self, *, {', '.join(signature)}):\n" + "\n".join(body) + "\n"
    namespace: dict[str, Any] = {}
    exec(source, env, namespace)  # generated from the class's own fields
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__doc__ = cls.__dict__["__init__"].__doc__
    setattr(cls, "__init__", init)  # noqa: B010 - mypy forbids assigning a method
    return cls
