"""Per-attribute size caps shared by every span adapter."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from spanjudge.spans.record import AttrValue

# The hash is of the whole value: two long values that share their first characters (two
# session ids, say) stay two values once cut.
TRUNCATION_MARK = "…[truncated by spanjudge; sha256 {digest}]"


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """Caps applied while decoding. Values over a cap are cut, marked and counted, never dropped."""

    max_attr_chars: int = 65_536
    max_attrs_per_span: int = 512
    max_events_per_span: int = 1_024
    max_array_len: int = 4_096


DEFAULT_LIMITS = Limits()


def cap_value(value: AttrValue, limits: Limits) -> tuple[AttrValue, int]:
    """Cut a string value (or strings inside arrays) to the cap; returns (value, cuts)."""
    if isinstance(value, str):
        if len(value) > limits.max_attr_chars:
            digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:16]
            return value[: limits.max_attr_chars] + TRUNCATION_MARK.format(digest=digest), 1
        return value, 0
    if isinstance(value, tuple):
        cuts = 0
        items = []
        for item in value[: limits.max_array_len]:
            capped, n = cap_value(item, limits)
            cuts += n
            items.append(capped)
        if len(value) > limits.max_array_len:
            cuts += 1
        return tuple(items), cuts
    return value, 0
