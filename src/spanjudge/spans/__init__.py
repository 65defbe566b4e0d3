"""Span adapters: every front end turns its input into `SpanRecord`s here."""

from spanjudge.spans.record import AttrValue, SpanEvent, SpanLink, SpanRecord

__all__ = ["AttrValue", "SpanEvent", "SpanLink", "SpanRecord"]
