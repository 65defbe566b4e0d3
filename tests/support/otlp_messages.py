"""Comparing emitted OTLP messages across emissions."""

from __future__ import annotations

from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
from opentelemetry.proto.trace.v1.trace_pb2 import Span


def timeless(message: Span | LogRecord) -> bytes:
    """A span or log record without the fields that differ from one emission to the next: the
    evaluation span's own span id and the timestamps."""
    copy = type(message)()
    copy.CopyFrom(message)
    if isinstance(copy, Span):
        copy.span_id = b""
        copy.start_time_unix_nano = copy.end_time_unix_nano = 0
        for event in copy.events:
            event.time_unix_nano = 0
    else:
        copy.time_unix_nano = copy.observed_time_unix_nano = 0
    return copy.SerializeToString(deterministic=True)
