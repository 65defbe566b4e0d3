"""What the session store's memory budget charges: a span (`spans/sizes.py`, where the fast
decoder can work it out while it reads the span) and an open session's own structures."""

from __future__ import annotations

from spanjudge.spans.sizes import estimate_size

# An open session's own structures: the record, its span list and `seen` set (their empty
# size; slots are charged per span), its entries in the store's dicts and deadline heap, and
# its key. Measured with tracemalloc at ~1.2 KB for a session of three spans.
SESSION_BASE = 1024

__all__ = ["SESSION_BASE", "estimate_size"]
