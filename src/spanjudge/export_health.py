"""One line when verdict export starts failing and one when it works again.

The OTLP exporters log each retry ("Transient error ... retrying in 1.2s") and each failed call
("Failed to export ..."), per signal: behind an unreachable endpoint that is a line every few
seconds for as long as the outage lasts, and none of them says that nothing is lost. In `serve`
those lines are replaced by `ExportHealth`'s two (they still show with ``--log-level DEBUG``),
and in-process by `configure_opentelemetry`'s (they still show when the ``spanjudge`` logger is
at DEBUG). Shared by both front ends, so it names no configuration of either.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger("spanjudge.sidecar")  # serve's; configure_opentelemetry passes its own

# The OTLP exporters' loggers (opentelemetry-exporter-otlp-proto-grpc / -http) and the starts
# of the lines of theirs that ExportHealth replaces.
SDK_LOGGERS = (
    "opentelemetry.exporter.otlp.proto.grpc.exporter",
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.exporter.otlp.proto.http._log_exporter",
    "opentelemetry.exporter.otlp.proto.http.metric_exporter",
    "opentelemetry.exporter.otlp.common.http",
)
_REPLACED = (
    "Transient error",
    "Failed to export",
    "Shutdown in progress, aborting retry",  # serve's shutdown says what it could not send
    "Exporter already shutdown, ignoring batch",  # (its exporters are aborted at the deadline)
)
# No cause in these (an HTTP failure's came a line before)
_SAYS_NOTHING = ("due to timeout, max retries or shutdown", "Shutdown in progress", "already shut")


def _detail(message: str) -> str:
    """What went wrong, from an exporter's line: its error details, without the retry talk."""
    for marker in ("Error details: ", "error details: "):
        if marker in message:
            message = message.split(marker, 1)[1]
            break
    else:
        message = message.removeprefix("Transient error ").split(" encountered while", 1)[0]
    return message if len(message) <= 240 else message[:239] + "…"


class ExportHealth:
    """Whether OTLP export to one endpoint works, per signal (traces, logs, metrics): failing as
    soon as one signal's export failed, working again once every failed one got through."""

    def __init__(
        self, target: str, max_backlog: int, *, logger: logging.Logger = log, outcome: str = ""
    ) -> None:
        self.target = target
        self.max_backlog = max_backlog
        self.log = logger
        self.outcome = outcome  # what happens to what is not sent (serve's words when empty)
        self.detail = ""  # the exporters' last word on what went wrong
        self._failing: set[tuple[str, str]] = set()
        self._since = 0.0
        self._lock = threading.Lock()
        # In an evaluation process: each signal's change goes to serve, which says it once.
        self.relay: Callable[[str, bool, str], None] | None = None

    @property
    def failing(self) -> bool:
        return bool(self._failing)

    def result(
        self,
        signal: str,
        ok: bool,
        error: BaseException | None = None,
        *,
        source: str = "",
        why: str | None = None,
    ) -> None:
        """One export call's outcome (``source``: the evaluation process it came from)."""
        relay = self.relay
        with self._lock:
            was = bool(self._failing)
            changed = ((signal, source) in self._failing) == ok
            if ok:
                self._failing.discard((signal, source))
            else:
                self._failing.add((signal, source))
            now = bool(self._failing)
            if now and not was:
                self._since = time.monotonic()
        if why is None:
            why = _detail(str(error)) if error is not None else self.detail or "not accepted"
        if relay is not None:
            if changed:
                relay(signal, ok, why)
            return
        if now and not was and self.outcome:
            self.log.warning(
                "verdict export to %s is failing (%s: %s); %s",
                self.target,
                signal,
                why,
                self.outcome,
            )
        elif now and not was:
            self.log.warning(
                "verdict export to %s is failing (%s: %s); nothing is lost: evaluation spans and"
                " log records wait and are retried, their sessions stay spooled (receivers"
                " answer 503/UNAVAILABLE once %d wait, export.max_queue_spans); metrics are"
                " cumulative, a later export carries them",
                self.target,
                signal,
                why,
                self.max_backlog,
            )
        elif was and not now:
            self.log.info(
                "verdict export to %s works again (failing for %.0fs); what waited is sent",
                self.target,
                time.monotonic() - self._since,
            )


_current = threading.local()  # the ExportHealth of the export call this thread is in, if any


class exporting:  # lower case: used as a `with` statement, like a function
    """``with exporting(health): exporter.export(...)``: the exporter's retry and failure lines
    logged during that call are replaced by ``health``'s (`_Replaced`), and what they say of the
    cause is kept for its lines. Lines of exports outside such a block (an exporter of the
    application's own, in the same process) are left alone."""

    __slots__ = ("_health", "_outer")

    def __init__(self, health: ExportHealth) -> None:
        self._health = health
        self._outer: ExportHealth | None = None

    def __enter__(self) -> None:
        self._outer = getattr(_current, "health", None)
        _current.health = self._health

    def __exit__(self, *_: object) -> None:
        _current.health = self._outer


class _Replaced(logging.Filter):
    """Drops the exporters' retry and failure lines logged during one of spanjudge's exports
    (keeping what they said for its `ExportHealth`), unless that health's logger (serve's, or the
    in-process one) is at DEBUG."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if not message.startswith(_REPLACED):
            return True
        health: ExportHealth | None = getattr(_current, "health", None)
        if health is None:
            return True  # not spanjudge's export: the line is for whoever owns that exporter
        if not any(words in message for words in _SAYS_NOTHING):
            health.detail = _detail(message)
        return health.log.isEnabledFor(logging.DEBUG)


_lock = threading.Lock()
_healths: dict[str, ExportHealth] = {}  # per target: serve and its evaluation processes have one


def health_for(
    target: str, max_backlog: int, *, logger: logging.Logger = log, outcome: str = ""
) -> ExportHealth:
    """The health of export to ``target`` in this process (shared by its span, log and metric
    exporters); the exporters' own retry lines during calls made ``with exporting(health)``
    give way to it."""
    with _lock:
        if not _healths:
            for name in SDK_LOGGERS:
                logging.getLogger(name).addFilter(_Replaced())
        health = _healths.get(target)
        if health is None:
            health = _healths[target] = ExportHealth(
                target, max_backlog, logger=logger, outcome=outcome
            )
        return health
