"""The little of protobuf's wire format `emit.otlp` writes: fields as bytes, without messages.

`serve` encodes each verdict's attributes once, as bytes, and reuses them in the span event and
the log record, instead of building a protobuf message per attribute and copying the attribute
list into both: with protobuf messages, encoding verdicts took about a quarter of serve's CPU
behind the Collector (py-spy, `bench/bench_collector.py`), several times what the bytes take.

What is written is what protobuf's serializer writes, so that the requests stay the same byte
for byte: the caller writes fields in field-number order; a scalar at its zero value (0, empty
string or bytes) is left out, as proto3 leaves it out, while a message field that is set is
written even when empty (`message`). Each field is written after its ``tag`` (`tag`: its number
and wire type, made once by the caller). `tests/emit/test_otlp_wire.py` checks against
protobuf's own encoding. Reference: https://protobuf.dev/programming-guides/encoding/
"""

from __future__ import annotations

import struct

VARINT, I64, LEN, I32 = 0, 1, 2, 5  # wire types
_INT64 = 1 << 63
_ONE_BYTE = [bytes((n,)) for n in range(0x80)]  # the varints of one byte
_FIXED64 = struct.Struct("<Q")
_FIXED32 = struct.Struct("<I")
_DOUBLE = struct.Struct("<d")


def varint(value: int) -> bytes:
    """A base-128 varint; a negative value as its 64-bit two's complement (ten bytes), as
    protobuf writes an int64."""
    if 0 <= value < 0x80:
        return _ONE_BYTE[value]
    if 0 < value < 0x4000:  # two bytes: the length of most strings over 127 bytes
        return bytes((value & 0x7F | 0x80, value >> 7))
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def tag(number: int, wire_type: int) -> bytes:
    """A field's key: its number and wire type."""
    return varint(number << 3 | wire_type)


def sized(data: bytes) -> bytes:
    """``data`` after its length: a length-delimited field without its tag."""
    size = len(data)
    return (_ONE_BYTE[size] if size < 0x80 else varint(size)) + data


def message(tag: bytes, data: bytes) -> bytes:
    """A message field that is set (written even when the message is empty), ``data`` being the
    message's encoding; a repeated message field is one of these per element."""
    size = len(data)
    return tag + (_ONE_BYTE[size] if size < 0x80 else varint(size)) + data


def string(tag: bytes, text: str) -> bytes:
    """A string field (left out when empty)."""
    return message(tag, text.encode()) if text else b""


def data(tag: bytes, value: bytes) -> bytes:
    """A bytes field (left out when empty)."""
    return message(tag, value) if value else b""


def uint(tag: bytes, value: int) -> bytes:
    """An unsigned integer or enum field (left out when 0)."""
    return tag + varint(value) if value else b""


def int64(value: int) -> bytes:
    """An int64's varint, refused outside its range as protobuf refuses it."""
    if not -_INT64 <= value < _INT64:
        raise ValueError(f"Value out of range: {value}")
    return varint(value)


def double(value: float) -> bytes:
    """A double's eight bytes."""
    return _DOUBLE.pack(value)


def fixed64(tag: bytes, value: int) -> bytes:
    """A fixed64 field, such as a Unix time in nanoseconds (left out when 0)."""
    return tag + _FIXED64.pack(value) if value else b""


def fixed32(tag: bytes, value: int) -> bytes:
    """A fixed32 field, such as span flags (left out when 0)."""
    return tag + _FIXED32.pack(value) if value else b""
