"""`record_class`: spanjudge's value classes, without `dataclasses` (CONTRIBUTING.md, "Values").

``@record_class(frozen=True, slots=True, kw_only=True)`` makes a class that behaves as the same
``@dataclass(...)`` would: the same ``__init__`` (parameters, defaults, default factories, errors,
``__post_init__``), ``__repr__``, ``__eq__``, ``__hash__``, frozen assignment errors, ``__slots__``,
``__match_args__``, ``__doc__`` and pickling. It exists for start-up: a ``@dataclass`` compiles six
generated functions per class when its module is imported (most of `spanjudge eval`'s start-up on
a small file, with ``import dataclasses`` bringing in `inspect`). A record compiles nothing then:
``__eq__``, ``__hash__`` and ``__repr__`` are shared functions over the class's field tuple, and
``__init__`` is compiled only once the class is hot (`spanjudge.record_init`); that ``__init__``
stores each field through its slot's descriptor, about twice as fast as the generated one.

Only what spanjudge uses is supported: options ``frozen``, ``slots``, ``kw_only`` (all fields or
none) and ``eq``; `field` with ``default`` or ``default_factory``; no inheritance of fields.
Use `replace` and `fields` from here. For other code, ``dataclasses.fields``, ``replace``,
``asdict`` and ``is_dataclass`` work on records too: ``__dataclass_fields__`` and
``__dataclass_params__`` are made (importing `dataclasses`) the first time someone asks.
`slot_setters` serves the fast decoders, which build records with ``object.__new__``.
"""

from __future__ import annotations

import sys
from _thread import get_ident  # = threading.get_ident, without importing threading
from collections.abc import Callable
from operator import attrgetter

from spanjudge.record_init import FACTORY, MISSING, LazyInit
from spanjudge.record_init import method as _method

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, TypeVar, dataclass_transform, overload

    T = TypeVar("T")
else:  # at run time without importing `typing` (start-up): what it does there, less the mark
    # it leaves for type checkers

    def dataclass_transform(**_: Any) -> Callable[[Any], Any]:
        return lambda decorator: decorator


class FrozenInstanceError(AttributeError):
    """Assignment to or deletion of a field of a frozen record (an `AttributeError`, as
    dataclasses' error of the same name; also that one when `dataclasses` is imported)."""


_both: list[type] = []  # the error that is dataclasses' too, made once dataclasses is imported


def _frozen_error(message: str) -> AttributeError:
    """`FrozenInstanceError`, and `dataclasses.FrozenInstanceError` for code that catches that
    one (it imported `dataclasses` to name it): what a frozen dataclass raised."""
    known = sys.modules.get("dataclasses")
    if known is None:
        return FrozenInstanceError(message)
    if not _both:
        bases = (FrozenInstanceError, known.FrozenInstanceError)
        _both.append(type("FrozenInstanceError", bases, {"__module__": __name__}))
    return _both[0](message)  # type: ignore[no-any-return]


class Field:
    """One field of a record: its name, annotation, default or default factory."""

    __slots__ = ("default", "default_factory", "kw_only", "name", "type")

    def __init__(self, default: Any, default_factory: Any) -> None:
        if default is not MISSING and default_factory is not MISSING:
            raise ValueError("cannot specify both default and default_factory")
        self.name = ""
        self.type: Any = None
        self.default = default
        self.default_factory = default_factory
        self.kw_only = False

    def __repr__(self) -> str:
        return f"Field(name={self.name!r}, type={self.type!r}, default={self.default!r})"


if TYPE_CHECKING:

    @overload
    def field(*, default: T) -> T: ...
    @overload
    def field(*, default_factory: Callable[[], T]) -> T: ...


def field(*, default: Any = MISSING, default_factory: Any = MISSING) -> Any:
    """A field's default (``default``) or a function making one per instance (``default_factory``),
    as `dataclasses.field`."""
    return Field(default, default_factory)


@dataclass_transform(field_specifiers=(field,))
def record_class(
    *, frozen: bool = False, slots: bool = False, kw_only: bool = False, eq: bool = True
) -> Callable[[type[T]], type[T]]:
    """The class decorator: ``@record_class(...)`` with the options of ``@dataclass(...)``."""

    def decorate(cls: type[T]) -> type[T]:
        made: type[T] = _build(cls, frozen=frozen, slots=slots, kw_only=kw_only, eq=eq)
        return made

    return decorate


def fields(class_or_instance: Any) -> tuple[Field, ...]:
    """The record's fields, in order (as `dataclasses.fields`)."""
    try:
        return class_or_instance.__record_fields__  # type: ignore[no-any-return]
    except AttributeError:
        raise TypeError("must be called with a record type or instance") from None


def _replace(obj: T, /, **changes: Any) -> T:
    """A copy of record ``obj`` with ``changes`` (as `dataclasses.replace`; an unknown name is a
    TypeError from ``__init__``)."""
    cls = obj.__class__
    try:
        names, values = cls.__record_names__, cls.__record_values__  # type: ignore[attr-defined]
    except AttributeError:
        raise TypeError("replace() should be called on record instances") from None
    kwargs = dict(zip(names, values(obj), strict=True))
    kwargs.update(changes)
    return cls(**kwargs)


if TYPE_CHECKING:  # type checkers check the changes against the fields for dataclasses.replace
    from dataclasses import replace as replace
else:
    replace = _replace


def slot_setters(cls: type, names: tuple[str, ...]) -> tuple[Any, ...]:
    """The slot setters of record ``cls``'s fields, ``names`` exactly its fields in order: a decoder
    makes a record with ``object.__new__(cls)`` and these (about three times cheaper than calling
    ``__init__``, which matters at millions of spans); it must set every field."""
    if tuple(f.name for f in fields(cls)) != names:
        raise RuntimeError(
            f"{cls.__name__} gained or lost a field: update the fast decoders' field list"
            " (spans/record.py SPAN_RECORD_FIELDS, spans/jsonfast.py, spans/otlp_proto.py)"
        )
    return tuple(cls.__dict__[name].__set__ for name in names)


def _is_classvar(annotation: Any) -> bool:
    if isinstance(annotation, str):
        return annotation.startswith(("ClassVar", "typing.ClassVar"))
    # an annotation object can be typing's ClassVar only once someone imported typing (spanjudge
    # itself does not, to run)
    typing = sys.modules.get("typing")
    if typing is None:
        return False
    marker = typing.ClassVar
    return annotation is marker or getattr(annotation, "__origin__", None) is marker


def _collect(cls: type, kw_only: bool) -> tuple[Field, ...]:
    found: list[Field] = []
    annotations = cls.__dict__.get("__annotations__", {})  # noqa: RUF063 - no inspect
    for base in cls.__mro__[1:]:
        if "__record_fields__" in base.__dict__ or "__dataclass_fields__" in base.__dict__:
            raise TypeError(f"{cls.__name__}: a record does not inherit fields ({base.__name__})")
    for name, annotation in annotations.items():
        if _is_classvar(annotation):
            continue
        value = cls.__dict__.get(name, MISSING)
        spec = value if isinstance(value, Field) else Field(value, MISSING)
        spec.name, spec.type, spec.kw_only = name, annotation, kw_only
        if spec.default is not MISSING and type(spec.default).__hash__ is None:
            raise ValueError(
                f"mutable default {type(spec.default)} for field {name} is not allowed:"
                " use default_factory"
            )
        if not kw_only and found and _has_default(found[-1]) and not _has_default(spec):
            raise TypeError(f"non-default argument {name!r} follows default argument")
        found.append(spec)
    for name, value in cls.__dict__.items():
        if isinstance(value, Field) and name not in annotations:
            raise TypeError(f"{name!r} is a field but has no type annotation")
    return tuple(found)


def _has_default(f: Field) -> bool:
    return f.default is not MISSING or f.default_factory is not MISSING


def _build(cls: Any, *, frozen: bool, slots: bool, kw_only: bool, eq: bool) -> Any:
    specs = _collect(cls, kw_only)
    names = tuple(f.name for f in specs)
    own = dict(cls.__dict__)
    if frozen and ("__setattr__" in own or "__delattr__" in own):
        raise TypeError(f"Cannot overwrite attribute __setattr__ in class {cls.__name__}")
    if slots:
        if "__slots__" in own:
            raise TypeError(f"{cls.__name__} already specifies __slots__")
        for name in (*names, "__dict__", "__weakref__"):
            own.pop(name, None)
        own["__slots__"] = names
        qualname = cls.__qualname__
        cls = type(cls)(cls.__name__, cls.__bases__, own)
        cls.__qualname__ = qualname
    else:
        for f in specs:
            if f.default is not MISSING:
                setattr(cls, f.name, f.default)
            elif isinstance(own.get(f.name), Field):
                delattr(cls, f.name)
    values = _values_of(names)
    new = {
        "__record_fields__": specs,
        "__record_names__": names,
        "__record_values__": staticmethod(values),
        "__record_options__": (frozen, slots, kw_only, eq),
        "__dataclass_fields__": _DataclassView(cls, "__dataclass_fields__"),
        "__dataclass_params__": _DataclassView(cls, "__dataclass_params__"),
        "__init__": LazyInit(cls),
        "__repr__": _repr,
    }
    new["__match_args__"] = () if kw_only else names
    if eq:
        new["__eq__"], hash_fn = _eq_hash_of(cls, values)
        explicit_hash = own.get("__hash__", MISSING) is not MISSING and not (
            own["__hash__"] is None and "__eq__" in own
        )
        if not explicit_hash:  # as dataclasses: frozen gets a hash, mutable none
            new["__hash__"] = hash_fn if frozen else None
    if frozen:
        new["__setattr__"], new["__delattr__"] = _frozen_of(cls, frozenset(names))
        if slots:
            new["__getstate__"] = _getstate
            new["__setstate__"] = _setstate_of(cls, names)
    for name, value in new.items():
        if name not in own or name == "__hash__":  # nothing the class defines, but a hash
            setattr(cls, name, value)
    if cls.__doc__ is None:
        cls.__doc__ = cls.__name__ + _signature(specs, kw_only)
    return cls


def _values_of(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """A function giving an instance's field values as a tuple (C-speed `attrgetter`)."""
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        one = attrgetter(names[0])
        return lambda obj: (one(obj),)
    return lambda obj: ()


def _eq_hash_of(cls: type, values: Callable[[Any], tuple[Any, ...]]) -> tuple[Any, Any]:
    """``__eq__`` and ``__hash__`` as dataclasses generates them: over the field values' tuple."""

    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is self.__class__:
            return values(self) == values(other)
        return NotImplemented

    def __hash__(self: Any) -> int:
        return hash(values(self))

    return _method(cls, "__eq__", __eq__), _method(cls, "__hash__", __hash__)


def _frozen_of(cls: Any, names: frozenset[str]) -> tuple[Any, Any]:
    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise _frozen_error(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise _frozen_error(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    return _method(cls, "__setattr__", __setattr__), _method(cls, "__delattr__", __delattr__)


_running: set[tuple[int, int]] = set()  # reprs under way (id, thread): a cycle shows as "..."


def _repr(self: Any) -> str:
    key = (id(self), get_ident())
    if key in _running:
        return "..."
    _running.add(key)
    try:
        values = self.__record_values__(self)
        shown = ", ".join(f"{n}={v!r}" for n, v in zip(self.__record_names__, values, strict=True))
        return f"{self.__class__.__qualname__}({shown})"
    finally:
        _running.discard(key)


def _getstate(self: Any) -> list[Any]:
    return list(self.__record_values__(self))


def _setstate_of(cls: type, names: tuple[str, ...]) -> Any:
    setters = [cls.__dict__[name].__set__ for name in names]

    def __setstate__(self: Any, state: Any) -> None:
        for setter, value in zip(setters, state, strict=False):  # as dataclasses
            setter(self, value)

    return _method(cls, "__setstate__", __setstate__)


def _annotation(annotation: Any) -> str:
    """An annotation as `inspect.signature` shows it (what ``dataclass`` puts in ``__doc__``)."""
    if isinstance(annotation, type) and not hasattr(annotation, "__origin__"):
        if annotation.__module__ == "builtins":
            return annotation.__qualname__
        return f"{annotation.__module__}.{annotation.__qualname__}"
    return (
        repr(annotation) if isinstance(annotation, str) else repr(annotation).replace("typing.", "")
    )


def _signature(specs: tuple[Field, ...], kw_only: bool) -> str:
    parts = ["*"] if kw_only and specs else []
    for f in specs:
        default = f.default if f.default is not MISSING else FACTORY
        shown = "" if not _has_default(f) else f" = {default!r}"
        parts.append(f"{f.name}: {_annotation(f.type)}{shown}")
    return f"({', '.join(parts)})"


class _DataclassView:
    """``__dataclass_fields__`` / ``__dataclass_params__`` for `dataclasses`' functions, made
    (importing `dataclasses`) on first access and then put in the class in its place."""

    __slots__ = ("attr", "cls")

    def __init__(self, cls: type, attr: str) -> None:
        self.cls, self.attr = cls, attr

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        import dataclasses

        cls = self.cls
        frozen, _, kw_only, eq = cls.__record_options__  # type: ignore[attr-defined]
        made: dict[str, Any] = {}
        for f in cls.__record_fields__:  # type: ignore[attr-defined]
            if f.default_factory is not MISSING:
                spec: Any = dataclasses.field(default_factory=f.default_factory)
            else:
                spec = dataclasses.field(
                    default=dataclasses.MISSING if f.default is MISSING else f.default
                )
            spec.name, spec.type, spec.kw_only = f.name, f.type, f.kw_only
            spec._field_type = dataclasses._FIELD  # type: ignore[attr-defined]
            made[f.name] = spec
        probe: Any = dataclasses.dataclass(frozen=frozen, eq=eq, kw_only=kw_only)(type("P", (), {}))
        type.__setattr__(cls, "__dataclass_fields__", made)
        type.__setattr__(cls, "__dataclass_params__", probe.__dataclass_params__)
        return made if self.attr == "__dataclass_fields__" else probe.__dataclass_params__
