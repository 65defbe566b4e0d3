"""Protobuf whose string fields are not all UTF-8, made parseable.

A proto3 `string` must be UTF-8, and the protobuf runtime refuses a whole message for one that is
not. The Collector does not check: it passes such bytes on from whatever sent them (a lone
surrogate encoded as bytes, `\\xed\\xa0\\x80`, say), so one bad string would refuse every span of
the Collector's batch. `parse_message` parses as the runtime does and, only when the runtime
refuses the bytes, once more with each byte of a string field that is not UTF-8 replaced by
U+FFFD, as the JSON and file readers read such bytes (`spans.text`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from spanjudge.spans.text import valid_text

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


# The protobuf runtime's own nesting limit: a message nested deeper is refused whatever its
# strings hold, so the walk stops there too.
_MAX_DEPTH = 100


def valid_utf8(data: bytes, descriptor: Any) -> bytes | None:
    """``data``, a serialized message of ``descriptor`` (a message class's `DESCRIPTOR`: the
    runtime's own type, or the pure-Python one), with every byte that is not UTF-8 in its
    string fields (nested messages included) replaced by U+FFFD; None when it has none or the
    bytes are not a well-formed message. The walk reads ``data`` in place and joins the
    repaired message once: memory stays about one copy of ``data`` at any depth."""
    try:
        repaired = _message(memoryview(data), descriptor, 0)
    except _Malformed:
        return None
    return None if repaired is None else b"".join(repaired[0])


def _message(data: memoryview, descriptor: Any, depth: int) -> tuple[list[Any], int] | None:
    """The pieces of the message with its strings repaired and their total length, or None
    when nothing in it needed repair."""
    if depth > _MAX_DEPTH:
        raise _Malformed
    parts: list[Any] = []
    size = 0
    copied = 0  # data[:copied] is in parts
    pos, end = 0, len(data)
    while pos < end:
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
            if field is None or field.type not in (_STRING, _MESSAGE):
                continue
            body = data[body_start:pos]
            inner: tuple[list[Any], int] | None = None
            if field.type == _STRING:
                try:
                    str(body, "utf-8")
                except UnicodeDecodeError:
                    # each bad byte one U+FFFD, as the JSON and file readers read them
                    text = valid_text(str(body, "utf-8", "surrogateescape")).encode()
                    inner = [text], len(text)
            elif field.message_type is not None:
                inner = _message(body, field.message_type, depth + 1)
            if inner is not None:
                head = varint(inner[1])
                parts += (data[copied:tag_end], head, *inner[0])
                size += tag_end - copied + len(head) + inner[1]
                copied = pos
        else:  # groups (wire types 3 and 4) appear nowhere in OTLP
            raise _Malformed
        if pos > end:
            raise _Malformed
    if copied == 0:
        return None
    parts.append(data[copied:])
    return parts, size + end - copied


def _varint(data: memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    while pos < len(data) and shift < 64:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
    raise _Malformed


def varint(value: int) -> bytes:
    """A non-negative integer as a protobuf varint (a length, a tag): what this module reads
    back (`_varint`), and what `spans.otlp_proto.wire_request` writes lengths with."""
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
