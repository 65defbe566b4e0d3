"""Reading recorded OTLP files: JSON lines (either spelling) and protobuf (`.pb`), traces or logs.

Each JSON line goes to the strict decoder (`jsonfast`) first; a document it declines goes to the
general one (`otlp_json`), which names what is wrong. Protobuf goes to `otlp_proto`. A JSON
logs document (`resourceLogs`, the Collector file exporter's logs pipeline) gives its records'
carriers (`spans.logs`), so traces and logs may share a file or a directory; so does a protobuf
logs request.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import IO

from spanjudge.errors import InputError
from spanjudge.spans import jsonfast
from spanjudge.spans.jsonfast import decode_fast, decode_parsed
from spanjudge.spans.limits import DEFAULT_LIMITS, Limits
from spanjudge.spans.logs import (
    LOG_RECORD_SPAN,
    decode_document,
    decode_logs_request,
    parse_logs_request,
)
from spanjudge.spans.otlp_proto import SpanProblem, decode_request, parse_request
from spanjudge.spans.record import SpanRecord
from spanjudge.spans.text import has_surrogates


@dataclass(frozen=True, slots=True)
class Chunk:
    """Spans decoded from one line (JSON) or one message (protobuf) of one input."""

    source: str
    line: int
    spans: list[SpanRecord]
    problems: list[SpanProblem]
    size_bytes: int
    # each span's memory-budget estimate, when the decoder worked them out (the fast road)
    sizes: list[int] | None = None
    # log records of a logs document not read as content, by reason (`spans.logs`)
    unread: dict[str, int] | None = None

    @property
    def log_records(self) -> int:
        """How many of ``spans`` carry a log record."""
        if self.unread is None:
            return 0
        return sum(1 for span in self.spans if span.name == LOG_RECORD_SPAN)


_PROTOBUF_SUFFIXES = (".pb", ".binpb", ".pb.gz", ".binpb.gz")
# A pretty-printed (multi-line) OTLP JSON document is read whole up to this size.
_WHOLE_DOCUMENT_MAX_BYTES = 256 * 1024 * 1024


# What a directory given as input contributes: the files this module reads, by their names.
DIRECTORY_SUFFIXES = (".jsonl", ".ndjson", ".json", ".pb", ".binpb", ".gz")


def expand_inputs(paths: Sequence[str]) -> list[str]:
    """``paths`` with each directory replaced by its trace files (`DIRECTORY_SUFFIXES`), sorted
    by name. Not recursive: the Collector's file exporter writes (and rotates) into one
    directory, and a subdirectory may well hold something else, reports included. Hidden files
    (a leading dot: editors' and writers' temporary files) are left out."""
    expanded: list[str] = []
    for path in paths:
        if path == "-" or not os.path.isdir(path):
            expanded.append(path)
            continue
        try:
            names = sorted(os.listdir(path))
        except OSError as exc:
            raise InputError(f"cannot list the directory: {exc.strerror}", file=path) from None
        found = [
            os.path.join(path, name)
            for name in names
            if name.endswith(DIRECTORY_SUFFIXES)
            and not name.startswith(".")
            and os.path.isfile(os.path.join(path, name))
        ]
        if not found:
            raise InputError(
                f"a directory with no trace file in it (read: *{', *'.join(DIRECTORY_SUFFIXES)};"
                " subdirectories are not read)",
                file=path,
            )
        expanded.extend(found)
    return expanded


def _open_text(path: str) -> IO[str]:
    if path == "-":
        if isinstance(sys.stdin, io.TextIOWrapper):  # as a file is read (below)
            sys.stdin.reconfigure(errors="surrogateescape")
        return sys.stdin
    # utf-8-sig: a byte-order mark some editors add is not part of the first line.
    # surrogateescape: a string the Collector wrote with bytes that are not UTF-8 (it passes
    # them on unchecked) is read with U+FFFD (`jsonfast.parse`), not the whole file refused.
    if path.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8-sig", errors="surrogateescape")
    return open(path, encoding="utf-8-sig", errors="surrogateescape")


def read_input(
    path: str,
    limits: Limits = DEFAULT_LIMITS,
    on_error: Callable[[InputError], None] | None = None,
) -> Iterator[Chunk]:
    """Yield decoded chunks. Unreadable files raise `InputError`; so do undecodable lines,
    unless ``on_error`` is given, which then receives the error and reading continues."""
    if path != "-" and not os.path.exists(path):
        raise InputError("no such file", file=path)
    if path != "-" and os.path.isdir(path):
        raise InputError("is a directory, expected an OTLP JSON lines or .pb file", file=path)
    if path.endswith(_PROTOBUF_SUFFIXES):
        yield from _read_protobuf(path, limits, on_error)
        return
    try:
        handle = _open_text(path)
    except OSError as exc:
        raise InputError(f"cannot open: {exc.strerror}", file=path) from None
    lineno = 0
    first = True
    source: Iterator[str] = iter(handle)
    try:
        while (line := next(source, None)) is not None:
            lineno += 1
            stripped = line.strip()
            if not stripped:
                continue
            sizes: list[int] = []
            fast = decode_fast(stripped, limits, sizes)
            if fast is not None:  # the ordinary line; anything else is read as before
                first = False
                yield Chunk(path, lineno, fast, [], len(line), sizes)
                continue
            try:
                doc = jsonfast.parse(stripped)
            except jsonfast.TooDeep:
                first = False
                if on_error is None:
                    raise _too_deep(path, lineno) from None
                on_error(_too_deep(path, lineno))
                continue
            except json.JSONDecodeError as exc:
                error = _json_error(path, lineno, stripped, exc)
                # bytes that are not UTF-8 where reading stopped, or a line that is no JSON at
                # all and holds some (binary input): the encoding, not the JSON, is the problem
                if has_surrogates(stripped[exc.pos : exc.pos + 1]) or (
                    stripped[:1] not in ("{", "[") and has_surrogates(stripped)
                ):
                    error = _not_utf8(path, lineno)
                if first and stripped[:1] in ("{", "["):
                    # Maybe not JSON lines but one pretty-printed document (as OTLP examples
                    # are), however its first line is laid out.
                    rest = handle.read(_WHOLE_DOCUMENT_MAX_BYTES + 1)
                    whole = _whole_document(path, lineno, line + rest, limits)
                    if whole is not None:
                        yield whole
                        return
                    source = iter(rest.splitlines(keepends=True))
                first = False
                if on_error is None:
                    raise error from None
                on_error(error)
                continue
            first = False
            sizes = []
            parsed = decode_parsed(doc, limits, sizes)  # the strict decoder, when it can
            if parsed is not None:
                yield Chunk(path, lineno, parsed, [], len(line), sizes)
                continue
            # a document the strict decoder declines (its problems to report, another layout,
            # a logs document)
            decoded = decode_document(doc, limits)
            yield Chunk(
                path, lineno, decoded.carriers, decoded.problems, len(line), None, decoded.unread
            )
    except UnicodeDecodeError:  # standard input, read as Python reads it
        raise _not_utf8(path, None) from None
    except (OSError, EOFError) as exc:  # corrupt or truncated .gz, read errors
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        after = f" after line {lineno}" if lineno else ""
        raise InputError(f"cannot read{after}: {reason}", file=path) from None
    finally:
        if handle is not sys.stdin:
            handle.close()


def _json_error(path: str, lineno: int, text: str, exc: json.JSONDecodeError) -> InputError:
    cut = text.lstrip().startswith("{") and not text.rstrip().endswith("}")
    hint = " (the line looks truncated)" if cut else ""
    where = (
        f"{exc.msg} column {exc.colno}"
        if exc.msg.endswith(" at")
        else (f"{exc.msg} at column {exc.colno}")
    )
    return InputError(
        f"invalid JSON: {where}{hint}; expected one OTLP JSON document per line",
        file=path,
        line=lineno,
    )


def _not_utf8(path: str, lineno: int | None) -> InputError:
    return InputError(
        "not UTF-8 text (protobuf input needs a .pb or .pb.gz extension)", file=path, line=lineno
    )


def _too_deep(path: str, lineno: int) -> InputError:
    return InputError(
        "invalid JSON: values nested too deeply to read",
        file=path,
        line=lineno,
    )


def _whole_document(path: str, start_line: int, text: str, limits: Limits) -> Chunk | None:
    """The rest of the input as one JSON document; None when it is JSON lines after all
    (whose first line is broken)."""
    if len(text) > _WHOLE_DOCUMENT_MAX_BYTES:
        raise InputError(
            "expected JSON lines (one OTLP document per line); compact it with `jq -c .`",
            file=path,
            line=start_line,
        )
    try:
        doc = jsonfast.parse(text)
    except jsonfast.TooDeep:
        raise _too_deep(path, start_line) from None
    except json.JSONDecodeError as exc:
        first_line = text.lstrip().split("\n", 1)[0]
        if exc.msg == "Extra data" or exc.lineno == 1 or '"spanId"' in first_line:
            # several documents, or a first line that holds whole spans: JSON lines after all
            return None
        raise InputError(
            f"invalid JSON at line {exc.lineno + start_line - 1}, column {exc.colno}: {exc.msg}",
            file=path,
        ) from None
    decoded = decode_document(doc, limits)
    return Chunk(
        path, start_line, decoded.carriers, decoded.problems, len(text), None, decoded.unread
    )


def _read_protobuf(
    path: str, limits: Limits, on_error: Callable[[InputError], None] | None
) -> Iterator[Chunk]:
    try:
        with open(path, "rb") as handle:
            data = handle.read()
        if path.endswith(".gz"):
            data = gzip.decompress(data)
    except (OSError, EOFError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        raise InputError(f"cannot read: {reason}", file=path) from None
    messages = _split_length_prefixed(data)
    for index, message in enumerate(messages if messages is not None else [data], start=1):
        try:
            yield _protobuf_chunk(path, index, message, limits)
        except ValueError as exc:
            error = InputError(str(exc), file=path, line=index)
            if on_error is None:
                raise error from None
            on_error(error)


def _protobuf_chunk(path: str, index: int, message: bytes, limits: Limits) -> Chunk:
    """One protobuf message: a traces request, or a logs request (the Collector's file exporter
    writes either, and the bytes do not say which). Both readings are tried; a logs request is
    taken only when it gives records and the traces reading gives no span (a log record does
    not parse as a span with ids). `ValueError` when neither reading parses."""
    error: ValueError | None = None
    spans: list[SpanRecord] = []
    problems: list[SpanProblem] = []
    sizes: list[int] = []  # worked out while decoding: the store need not measure again
    try:
        spans, problems = decode_request(parse_request(message), limits, sizes)
    except ValueError as exc:
        error = exc
    if spans:
        return Chunk(path, index, spans, problems, len(message), sizes)
    try:
        logs = decode_logs_request(parse_logs_request(message), limits)
    except ValueError:
        logs = None
    if logs is not None and logs.carriers:
        return Chunk(path, index, logs.carriers, logs.problems, len(message), None, logs.unread)
    if error is not None:
        raise error
    return Chunk(path, index, spans, problems, len(message))


def _split_length_prefixed(data: bytes) -> list[bytes] | None:
    """The Collector file exporter's proto format prefixes each message with a 4-byte length."""
    out = []
    pos = 0
    while pos < len(data):
        if pos + 4 > len(data):
            return None
        size = int.from_bytes(data[pos : pos + 4], "big")
        if size == 0 or pos + 4 + size > len(data):
            return None
        out.append(data[pos + 4 : pos + 4 + size])
        pos += 4 + size
    for message in out:
        try:
            parse_request(message)
        except ValueError:
            try:
                parse_logs_request(message)
            except ValueError:
                return None
    return out or None
