"""Request bodies to `SpanRecord`s: size limits, decompression, decoding and sanity checks.

Shared by both receivers and by the spool's replay, so a span accepted once is accepted again
after a restart. Nothing here raises anything but `BadRequest` on any input. A logs request
(`/v1/logs`, the gRPC LogsService) decodes to its records' carriers (`spans.logs`); its format
says so (`logs-pb`, `logs-json`: what the spool keeps beside the body).
"""

from __future__ import annotations

import contextlib
import time
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from spanjudge.sessions.keys import (
    BARE_KEY_COPIES,
    DEFAULT_KEY_ATTRIBUTES,
    NAMESPACED_KEY_SUFFIXES,
    decides,
)
from spanjudge.sidecar.config import InputConfig
from spanjudge.spans import jsonfast
from spanjudge.spans.jsonfast import decode_fast
from spanjudge.spans.limits import Limits
from spanjudge.spans.logs import (
    LOG_RECORD_SPAN,
    decode_logs_json,
    decode_logs_request,
    parse_logs_request,
)
from spanjudge.spans.otlp_json import decode_json_document
from spanjudge.spans.otlp_proto import (
    SpanHead,
    SpanProblem,
    decode_request,
    parse_keyed,
    parse_request,
    read_heads,
)
from spanjudge.spans.record import SpanRecord

FORMAT_PROTOBUF = "pb"
FORMAT_JSON = "json"
SIGNAL_TRACES = "traces"
SIGNAL_LOGS = "logs"
_LOGS_PREFIX = "logs-"
_NANOS = 1_000_000_000


class BadRequest(Exception):
    """The whole request is unusable. ``too_large`` separates size limits from malformed input."""

    def __init__(self, message: str, *, too_large: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.too_large = too_large


@dataclass(frozen=True, slots=True)
class Decoded:
    """The spans accepted from one request and the problems of the ones rejected."""

    # `SpanRecord`s; `SpanHead`s from `decode_heads`
    records: list[Any]
    problems: list[SpanProblem]
    # each record's `estimate_size`, when the decoder worked them out (the JSON fast road)
    sizes: list[int] | None = None
    # log records not carried, by reason (`spans.logs`; a logs request only)
    unread: dict[str, int] | None = None

    def error_message(self, limit: int = 8) -> str:
        """OTLP partial-success `error_message`: the first problems, with the count of the rest."""
        shown = "; ".join(str(p) for p in self.problems[:limit])
        rest = len(self.problems) - limit
        return shown + (f"; and {rest} more" if rest > 0 else "")


def gunzip(data: bytes, max_bytes: int) -> bytes:
    """Decompress a gzip body without ever holding more than ``max_bytes`` (no gzip bombs).

    Every member is decoded (RFC 1952 allows several; Go's reader, hence the Collector, reads
    them all), and anything after the last member that is not a whole member is an error: a
    200 for a body partly read would acknowledge spans that were never seen."""
    out = bytearray()
    rest = data
    while True:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            out += inflater.decompress(rest, max_bytes + 1 - len(out))
        except zlib.error as exc:
            where = "" if rest is data else f" after {len(data) - len(rest)} bytes"
            raise BadRequest(f"invalid gzip body{where}: {exc}") from None
        if len(out) > max_bytes or inflater.unconsumed_tail:
            raise BadRequest(
                f"decompressed request exceeds the limit of {max_bytes} bytes", too_large=True
            )
        if not inflater.eof:
            raise BadRequest("invalid gzip body: truncated")
        rest = inflater.unused_data
        if not rest:
            return bytes(out)


def stored_format(fmt: str, signal: str) -> str:
    """The format a body of ``signal`` in encoding ``fmt`` is decoded (and spooled) under."""
    return _LOGS_PREFIX + fmt if signal == SIGNAL_LOGS else fmt


def is_logs_format(fmt: str) -> bool:
    """Whether a body decoded (or spooled) under ``fmt`` is a logs request."""
    return fmt.startswith(_LOGS_PREFIX)


def decode_body(data: bytes, fmt: str, limits: Limits, checks: InputConfig) -> Decoded:
    """Decode an OTLP body in ``fmt`` (`pb` or `json`, a traces request; `logs-pb` or
    `logs-json`, a logs request); per-span problems are kept, not raised."""
    _check_size(data, checks)
    if is_logs_format(fmt):
        return _decode_logs(data, fmt[len(_LOGS_PREFIX) :], limits, checks)
    # each record's `estimate_size`, worked out while decoding (protobuf, the JSON fast road)
    sizes: list[int] | None = None
    with _as_bad_request(fmt):
        if fmt == FORMAT_PROTOBUF:
            try:
                request = parse_request(data)
            except ValueError as exc:
                raise BadRequest(str(exc)) from None
            sizes = []
            records, problems = decode_request(request, limits, sizes)
        else:
            # The fast road answers the ordinary document with exactly the general road's records
            # (no problems); anything else (a lone surrogate, `{}`, an odd field) gets None.
            sizes = []
            fast = decode_fast(data, limits, sizes)
            if fast is not None:
                return check_records(fast, [], checks, sizes=sizes)
            doc = _json_document(data)
            spans = doc.get("resourceSpans", doc.get("resource_spans")) if type(doc) is dict else 0
            if spans is None:
                # Proto3 JSON: an absent (or null) repeated field is empty, and unknown fields are
                # ignored, so `{}` is a valid empty request; OTLP answers it with success.
                return Decoded([], [])
            records, problems = decode_json_document(doc, limits)
            sizes = None  # the general road works none out: the store does
    return check_records(records, problems, checks, sizes=sizes)


def decode_heads(
    data: bytes, limits: Limits, checks: InputConfig, key_attributes: Sequence[str]
) -> Decoded:
    """A protobuf traces body as `decode_body` would take it (the same spans accepted, the
    same problems), each span a `SpanHead`: decoded only as far as routing needs."""
    _check_size(data, checks)
    with _as_bad_request(FORMAT_PROTOBUF):
        try:
            request = parse_keyed(data)
        except ValueError as exc:
            raise BadRequest(str(exc)) from None
        keys = {*DEFAULT_KEY_ATTRIBUTES, *key_attributes, *BARE_KEY_COPIES}
        heads, problems = read_heads(request, data, limits, keys, NAMESPACED_KEY_SUFFIXES, decides)
    return check_records(heads, problems, checks)


def _check_size(data: bytes, checks: InputConfig) -> None:
    if len(data) > checks.max_request_bytes:
        raise BadRequest(
            f"request of {len(data)} bytes exceeds the limit of {checks.max_request_bytes}",
            too_large=True,
        )


@contextlib.contextmanager
def _as_bad_request(what: str) -> Iterator[None]:
    """Decoding a ``what`` request: whatever fails is the 400 it answers. A decoder bug on odd
    input must answer 400, not kill a thread; out of memory passes (answered retryable
    upstream)."""
    try:
        yield
    except (BadRequest, MemoryError):
        raise
    except RecursionError:
        raise BadRequest("request nests values too deeply") from None
    except Exception as exc:
        raise BadRequest(f"malformed OTLP {what} request: {type(exc).__name__}: {exc}") from None


def _json_document(data: bytes) -> Any:
    """A JSON request body, traces and logs alike (`jsonfast.parse`: lone surrogates
    replaced)."""
    try:
        return jsonfast.parse(data)
    except ValueError as exc:
        raise BadRequest(f"not valid JSON: {exc}") from None


def _decode_logs(data: bytes, fmt: str, limits: Limits, checks: InputConfig) -> Decoded:
    with _as_bad_request(f"logs {fmt}"):
        if fmt == FORMAT_PROTOBUF:
            try:
                request = parse_logs_request(data)
            except ValueError as exc:
                raise BadRequest(str(exc)) from None
            decoded = decode_logs_request(request, limits)
        else:
            doc = _json_document(data)
            if type(doc) is not dict:
                raise BadRequest("expected a JSON object with 'resourceLogs'")
            if doc.get("resourceLogs", doc.get("resource_logs")) is None:
                return Decoded([], [])  # proto3 JSON: `{}` is a valid empty request
            decoded = decode_logs_json(doc, limits)
    checked = check_records(decoded.carriers, decoded.problems, checks)
    return Decoded(checked.records, checked.problems, unread=decoded.unread)


def check_records(
    records: Sequence[SpanRecord] | Sequence[SpanHead],
    problems: list[SpanProblem],
    checks: InputConfig,
    now_s: float | None = None,
    sizes: list[int] | None = None,
) -> Decoded:
    """Reject spans with absurd timestamps and spans on a parent cycle within the request;
    ``sizes`` (one per record) are kept for the records kept."""
    now = time.time() if now_s is None else now_s
    low = int(checks.min_start_unix_s * _NANOS)
    high = int((now + checks.max_future_skew_s) * _NANOS)
    longest = int(checks.max_span_duration_s * _NANOS)
    kept: list[Any] = []
    for record in records:
        start = record.start_unix_nano
        if low <= start <= high and record.end_unix_nano - start <= longest:
            kept.append(record)
            continue
        sizes = None  # rare: the store works them out
        where = f"span {record.span_id} of trace {record.trace_id}"
        field = "startTimeUnixNano"
        if record.name == LOG_RECORD_SPAN:
            where = f"log record of span {record.parent_span_id} of trace {record.trace_id}"
            field = "timeUnixNano"
        if not low <= start <= high:
            problems.append(SpanProblem(where, f"{field} {start} is not plausible"))
        else:
            problems.append(
                SpanProblem(where, f"duration exceeds {checks.max_span_duration_s:.0f}s")
            )
    cyclic = _cyclic(kept)
    if cyclic:
        for record in kept:
            if (record.trace_id, record.span_id) in cyclic:
                problems.append(
                    SpanProblem(
                        f"span {record.span_id} of trace {record.trace_id}",
                        "parentSpanId: the span is its own ancestor (cyclic parents)",
                    )
                )
        kept = [r for r in kept if (r.trace_id, r.span_id) not in cyclic]
        sizes = None
    return Decoded(kept, problems, sizes)


def _cyclic(records: Sequence[SpanRecord | SpanHead]) -> set[tuple[str, str]]:
    # A span on a cycle has its parent in the request and is the parent of a span on it that
    # does too. Usually none are (a root and its children): two passes over the bare span ids
    # (a superset: ids of other traces may match) leave the candidates, often none, and only
    # those are keyed by (trace, span) and walked. A span id given twice (the last copy's
    # parent counts) takes the walk over every span.
    ids = {r.span_id for r in records}
    candidates: Sequence[SpanRecord | SpanHead] = records
    if len(ids) == len(records):
        children = [r for r in records if r.parent_span_id in ids]
        parent_ids = {r.parent_span_id for r in children}
        candidates = [r for r in children if r.span_id in parent_ids]
        if not candidates:
            return set()
    parents = {(r.trace_id, r.span_id): r.parent_span_id for r in candidates}
    linked = {(t, p) for (t, _), p in parents.items() if p is not None and (t, p) in parents}
    parents = {n: parents[n] for n in linked if parents[n] is not None}
    if not parents:
        return set()
    on_cycle: set[tuple[str, str]] = set()
    done: set[tuple[str, str]] = set()
    for start in parents:
        path: list[tuple[str, str]] = []
        index: dict[tuple[str, str], int] = {}
        node: tuple[str, str] | None = start
        while node is not None and node in parents and node not in done:
            if node in index:
                on_cycle.update(path[index[node] :])
                break
            index[node] = len(path)
            path.append(node)
            parent = parents[node]
            node = (node[0], parent) if parent is not None else None
        done.update(path)
    return on_cycle
