"""The ``__init__`` of a record (`spanjudge.records`): nothing compiled until the class is hot.

Compiling a class's ``__init__`` costs about 0.3 ms (a 32-field `Step`: 0.5 ms), and a small
`spanjudge eval` makes instances of some 40 record classes, most of them a few times (its
configuration, its evaluators): compiled, that was a tenth of its run. So a class starts with a
shared ``__init__`` over its field table, which handles the usual call (keywords naming fields,
every required one given) and hands any other call to the compiled one, so that every error
is the one Python words for the real signature. After `COMPILE_AFTER` instances, or as soon
as someone looks ``__init__`` up on the class (`inspect.signature`, `help`), the class gets its
compiled ``__init__``: the same parameters as ``@dataclass`` generates, storing each field
through its slot's descriptor (about twice as fast as ``object.__setattr__``).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


COMPILE_AFTER = 16  # instances made through the shared __init__ before the class's own is compiled


class _Marker:
    __slots__ = ("shown",)

    def __init__(self, shown: str) -> None:
        self.shown = shown

    def __repr__(self) -> str:
        return self.shown


MISSING: Any = _Marker("MISSING")  # "no default", as dataclasses.MISSING
FACTORY: Any = _Marker("<factory>")  # a parameter with a default factory, as in dataclasses


def method(cls: type, name: str, fn: Any) -> Any:
    """``fn`` named as the method ``name`` of ``cls`` (what tracebacks and errors show)."""
    fn.__name__, fn.__qualname__, fn.__module__ = name, f"{cls.__qualname__}.{name}", cls.__module__
    return fn


class LazyInit:
    """The class's ``__init__`` until it is compiled: then replaced by the compiled one."""

    __slots__ = ("cls", "made", "shared")

    def __init__(self, cls: type) -> None:
        self.cls, self.made = cls, 0
        self.shared: Any = None  # made on the first instance

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None or self.made >= COMPILE_AFTER:  # looked up on the class, or hot
            init = self.compiled()
            return init if obj is None else init.__get__(obj, owner)
        self.made += 1
        shared = self.shared
        if shared is None:
            shared = self.shared = _shared_init(self.cls, self)
        return shared.__get__(obj, owner)

    def compiled(self) -> Any:
        init = _compile_init(self.cls)
        type.__setattr__(self.cls, "__init__", init)
        return init


def _store(cls: Any, name: str) -> Any:
    frozen, slots = cls.__record_options__[:2]
    if slots and (frozen or cls.__setattr__ is object.__setattr__):
        return cls.__dict__[name].__set__  # the slot's own descriptor
    if frozen:
        return lambda self, value: object.__setattr__(self, name, value)
    return lambda self, value: setattr(self, name, value)


def _shared_init(cls: Any, lazy: LazyInit) -> Any:
    table = []
    required = []
    for f in cls.__record_fields__:
        fallback = f.default if f.default is not MISSING else FACTORY
        factory = f.default_factory if f.default_factory is not MISSING else None
        if f.default is MISSING and factory is None:
            required.append(f.name)
        table.append((f.name, fallback, factory, _store(cls, f.name)))
    known, needed = frozenset(f.name for f in cls.__record_fields__), frozenset(required)
    post_init = hasattr(cls, "__post_init__")

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if args or not needed <= kwargs.keys() <= known:
            # positional arguments, an unknown or a missing name: the compiled __init__ binds
            # them as the class's signature says (and words the error, if any)
            return lazy.compiled()(self, *args, **kwargs)  # type: ignore[no-any-return]
        for name, fallback, factory, store in table:
            value = kwargs.get(name, fallback)
            if value is FACTORY and factory is not None:
                value = factory()
            store(self, value)
        if post_init:
            self.__post_init__()
        return None

    return method(cls, "__init__", __init__)


def _compile_init(cls: Any) -> Any:
    frozen, slots, kw_only, _ = cls.__record_options__
    direct = slots and (frozen or cls.__setattr__ is object.__setattr__)
    env: dict[str, Any] = {"_FACTORY": FACTORY, "_osa": object.__setattr__}
    signature, body = ["self", *(["*"] if kw_only and cls.__record_fields__ else [])], []
    for i, f in enumerate(cls.__record_fields__):
        name = f.name
        if f.default is not MISSING:
            env[f"_default{i}"] = f.default
            signature.append(f"{name}=_default{i}")
        elif f.default_factory is not MISSING:
            env[f"_factory{i}"] = f.default_factory
            signature.append(f"{name}=_FACTORY")
            body.append(f"    if {name} is _FACTORY:\n        {name} = _factory{i}()")
        else:
            signature.append(name)
        if direct:  # the slot's own descriptor: the store object.__setattr__ would do, faster
            env[f"_set{i}"] = cls.__dict__[name].__set__
            body.append(f"    _set{i}(self, {name})")
        elif frozen:
            body.append(f"    _osa(self, {name!r}, {name})")
        else:
            body.append(f"    self.{name} = {name}")
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    source = f"def __init__({', '.join(signature)}):\n" + "\n".join(body or ["    pass"]) + "\n"
    namespace: dict[str, Any] = {}
    exec(source, env, namespace)  # generated from the class's own field names
    init = namespace["__init__"]
    init.__annotations__ = {f.name: f.type for f in cls.__record_fields__} | {"return": None}
    return method(cls, "__init__", init)
