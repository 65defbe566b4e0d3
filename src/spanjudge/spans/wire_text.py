"""Protobuf whose string fields are not all UTF-8, made parseable.

A proto3 `string` must be UTF-8, and the protobuf runtime refuses a whole message for one that is
not. The Collector does not check: it passes such bytes on from whatever sent them (a lone
surrogate encoded as bytes, `\\xed\\xa0\\x80`, say), so one bad string would refuse every span of
the Collector's batch. `parse_message` parses as the runtime does and, only when the runtime
refuses the bytes, once more with each string field's invalid sequences replaced by U+FFFD, as
a UTF-8 decoder with ``errors="replace"`` reads them (the JSON readers replace lone surrogates
likewise, `spans.text`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from google.protobuf.message import Message

# `FieldDescriptorProto.Type` numbers (descriptor.proto), so that importing this module does not
# load protobuf: `spanjudge eval` of JSON never needs it
_STRING = 9
_MESSAGE = 11


class _Malformed(Exception):
    """The bytes are not a well-formed message: the runtime's own error stands."""


def parse_message(message: Message, data: bytes) -> None:
    """``message.ParseFromString(data)``; when the runtime refuses the bytes, once more with
    their string fields made valid UTF-8 (`valid_utf8`). Raises the runtime's first error when
    that does not help."""
    try:
        message.ParseFromString(data)
    except Exception as first:  # protobuf raises DecodeError, a private-ish subclass
        repaired = valid_utf8(data, message.DESCRIPTOR)
        if repaired is None:
            raise
        try:
            message.ParseFromString(repaired)
        except Exception:
            raise first from None


def valid_utf8(data: bytes, descriptor: Any) -> bytes | None:
    """``data``, a serialized message of ``descriptor`` (a message class's `DESCRIPTOR`: the
    runtime's own type, or the pure-Python one), with every invalid UTF-8 sequence in its
    string fields (nested messages included) replaced by U+FFFD; None when it has none or the
    bytes are not a well-formed message."""
    try:
        repaired = _message(data, descriptor)
    except (_Malformed, RecursionError):
        return None
    return repaired if repaired != data else None


def _message(data: bytes, descriptor: Any) -> bytes:
    out = bytearray()
    pos, end = 0, len(data)
    while pos < end:
        start = pos
        tag, pos = _varint(data, pos)
        tag_end = pos
        wire = tag & 7
        if wire == 0:
            _, pos = _varint(data, pos)
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        elif wire == 2:
            length, body_start = _varint(data, pos)
            pos = body_start + length
            if pos > end:
                raise _Malformed
            field = descriptor.fields_by_number.get(tag >> 3)
            if field is not None and field.type in (_STRING, _MESSAGE):
                body = data[body_start:pos]
                if field.type == _STRING:
                    body = body.decode("utf-8", "replace").encode()
                elif field.message_type is not None:
                    body = _message(body, field.message_type)
                out += data[start:tag_end]
                out += _encode_varint(len(body))
                out += body
                continue
        else:  # groups (wire types 3 and 4) appear nowhere in OTLP
            raise _Malformed
        if pos > end:
            raise _Malformed
        out += data[start:pos]
    return bytes(out)


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while pos < len(data) and shift < 64:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
    raise _Malformed


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
