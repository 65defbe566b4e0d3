"""The attribute values of the strict OTLP JSON decoder (`spans/jsonfast.py`): each read with its
exact type, anything but the ordinary case declines (`_DECLINE`: the general road takes the
document), and an attribute dict's memory-budget estimate worked out as it is read
(`spans/sizes.py` `attributes_size`, the same figure)."""

from __future__ import annotations

from sys import getsizeof
from typing import Any

from spanjudge.spans.limits import Limits
from spanjudge.spans.record import AttrValue
from spanjudge.spans.sizes import ENTRY_BASE, ENTRY_SIZE, STR_HEADER, attributes_size, nested_size

_FLOAT_WORDS = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


class _Decline(Exception):
    """Not the ordinary case: the general decoder takes the whole document."""


_DECLINE = _Decline()


def _int(value: Any) -> int:
    kind = value.__class__
    if kind is str:
        return int(value)  # ValueError declines
    if kind is int:
        return value  # type: ignore[no-any-return]
    raise _DECLINE


def _attrs(items: Any, limits: Limits) -> tuple[dict[str, AttrValue], int]:
    """The attributes and, when there are any, their `attributes_size` (else 0)."""
    if not items:
        return {}, 0
    count = len(items)
    if count > limits.max_attrs_per_span:  # not a list: declines when its items are read
        raise _DECLINE
    cap = limits.max_attr_chars
    out: dict[str, AttrValue] = {}
    size = ENTRY_BASE + count * ENTRY_SIZE
    for kv in items:
        value = kv["value"]  # a missing value (or kv not a dict) declines
        key = kv["key"]
        text = value.get("stringValue")  # AttributeError (value not a dict) declines
        if text.__class__ is str and key.__class__ is str:
            n = len(text)
            if n > cap:
                raise _DECLINE
            out[key] = text
            size += n if text.isascii() else getsizeof(text) - STR_HEADER
            continue
        if key.__class__ is not str or text is not None:
            raise _DECLINE
        number = value.get("intValue")
        if number.__class__ is str:  # int64 as a decimal string (the Collector's spelling)
            out[key] = int(number)  # ValueError declines
            continue
        decoded = out[key] = _other_value(value, limits)
        if decoded.__class__ is tuple:
            size += nested_size(decoded)
    if len(out) != count:  # a repeated key: the last value counts, as in the dict
        return out, attributes_size(out)
    return out, size


def _scalar(value: Any) -> AttrValue:
    """An AnyValue other than a string, as `any_value_json` reads it; odd ones decline."""
    if "intValue" in value:
        return _int(value["intValue"])
    if "doubleValue" in value:
        raw = value["doubleValue"]
        kind = raw.__class__
        if kind is float or kind is int:
            return float(raw)
        return _FLOAT_WORDS[raw]  # KeyError (or TypeError) declines
    if "boolValue" in value:
        return bool(value["boolValue"])
    raise _DECLINE


def _other_value(value: dict[str, Any], limits: Limits) -> AttrValue:
    if "intValue" in value or "doubleValue" in value or "boolValue" in value:
        return _scalar(value)
    if "arrayValue" not in value:
        raise _DECLINE
    array = value["arrayValue"]
    items = array.get("values") if type(array) is dict else array
    if not items:
        return ()
    if type(items) is not list or len(items) > limits.max_array_len:
        raise _DECLINE
    cap = limits.max_attr_chars
    out: list[AttrValue] = []
    for item in items:
        if type(item) is not dict:
            raise _DECLINE
        text = item.get("stringValue")
        if text is None:
            out.append(_scalar(item))
        elif text.__class__ is str and len(text) <= cap:
            out.append(text)
        else:
            raise _DECLINE
    return tuple(out)
