"""Trace and span id normalisation: everything becomes lowercase hex, once, at the edge."""

from __future__ import annotations

_HEX_DIGITS = "0123456789abcdefABCDEF"
_ZERO_SPAN = "0" * 16


class IdError(ValueError):
    """An id of the wrong length or alphabet."""


def id_from_bytes(raw: bytes, size: int, what: str) -> str:
    if len(raw) != size:
        raise IdError(f"{what} must be {size} bytes, got {len(raw)}")
    value = raw.hex()
    if value == "0" * (2 * size):
        raise IdError(f"{what} is all zeros (invalid)")
    return value


def id_from_text(text: str, size: int, what: str) -> str:
    """Accept hex (Collector file exporter) or base64 (protobuf JSON mapping) spellings."""
    if len(text) == 2 * size and not text.strip(_HEX_DIGITS):  # hex only (no regex to compile)
        value = text.lower()
        if value == "0" * (2 * size):
            raise IdError(f"{what} is all zeros (invalid)")
        return value
    import base64  # only for protobuf's JSON mapping (hex ids need none)

    try:
        raw = base64.b64decode(text, validate=True)
    except ValueError:  # binascii.Error included
        raise IdError(
            f"{what} must be {2 * size} hex characters or base64 of {size} bytes, got {text!r}"
        ) from None
    if len(raw) != size:
        raise IdError(
            f"{what} must be {2 * size} hex characters or base64 of {size} bytes, "
            f"got {text!r} ({len(raw)} bytes)"
        )
    return id_from_bytes(raw, size, what)


def optional_parent(raw: bytes) -> str | None:
    """Parent ids are optional: empty or all-zero means no parent."""
    if not raw or raw == b"\x00" * 8:
        return None
    return id_from_bytes(raw, 8, "parentSpanId")


def optional_parent_text(text: str | None) -> str | None:
    if not text or text == _ZERO_SPAN or text == "AAAAAAAAAAA=":
        return None
    return id_from_text(text, 8, "parentSpanId")
