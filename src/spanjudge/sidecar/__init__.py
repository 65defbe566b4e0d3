"""`spanjudge serve`: the OTLP sidecar a Collector exports agent traces to
(ARCHITECTURE.md section 10)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from spanjudge.config import Config, load_config
from spanjudge.errors import ConfigError
from spanjudge.sidecar.config import (
    DEFAULT_GRPC_ENDPOINT,
    DEFAULT_HTTP_ENDPOINT,
    DEFAULT_METRICS_ENDPOINT,
    ServeConfig,
    env_endpoint,
    parse_serve,
    usable_cores,
)
from spanjudge.sidecar.signals import StopSignals, end_by

if TYPE_CHECKING:
    from spanjudge.sidecar.server import Endpoints, Sidecar

__all__ = ["main", "serve_config"]

log = logging.getLogger("spanjudge.sidecar")


def serve_config(config: Config) -> ServeConfig:
    """The validated `serve` section (`load_config` parsed it once `sidecar.config` registered)."""
    section = config.sections.get("serve")
    if isinstance(section, ServeConfig):
        parsed = section
    else:
        problems: list[str] = []
        base = Path(config.source).parent if config.source else None
        parsed = parse_serve(section, "serve", problems, base=base)
        if problems:
            raise ConfigError(problems, source=config.source)
    ttl, interval = config.series_ttl_s, parsed.export.metrics_interval_s
    if parsed.export.enabled and 0 < ttl < interval:
        # An update a reader has not collected yet is lost to it when its series expires.
        raise ConfigError(
            f"labels.series_ttl ({ttl:g}s) is below serve.export.metrics_interval"
            f" ({interval:g}s): a series updated just after one OTLP metric export would expire"
            " before the next collects it, and that update would never be exported; set"
            f" labels.series_ttl to at least {interval:g}s (0: series never expire) or"
            " serve.export.metrics_interval lower",
            source=config.source,
        )
    return parsed


_WORKERS = usable_cores()
_LAG = f"{ServeConfig(workers=1).max_pending_age_s:g}s"
_BYTES = f"{ServeConfig(workers=1).max_pending_bytes // 2**20} MiB"
_EPILOG = f"""\
defaults (override in the `serve:` section of --config):
  OTLP/gRPC   {DEFAULT_GRPC_ENDPOINT}    (TraceService/Export, LogsService/Export)
  OTLP/HTTP   {DEFAULT_HTTP_ENDPOINT}    (POST /v1/traces and /v1/logs, protobuf or JSON, gzip;
                                 GET /healthz)
  metrics     {DEFAULT_METRICS_ENDPOINT}    (Prometheus GET /metrics)
  spool       ./spanjudge-spool.db  (spans are written here before a request is acknowledged)
  workers     {_WORKERS}  (evaluation processes: the cores serve may run on; 1: in serve)
  max_pending_age  {_LAG}  (refuse retryably while evaluation lags this far)
  max_pending_bytes  {_BYTES}  (refuse retryably past this many bytes of requests waiting)

verdicts go out over OTLP to the endpoint in `serve.export` or, when unset, to the standard
OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_PROTOCOL / OTEL_EXPORTER_OTLP_HEADERS variables.
Point it at a Collector receiver that does NOT route back into spanjudge (see collector-config/).
Once it listens, serve logs one line saying where; `spanjudge -v serve` (or `serve ... -v`) is
--log-level DEBUG. A sample: collector-config/spanjudge-serve.yaml.

exit status: 0 after a clean shutdown (SIGTERM/SIGINT), 2 for configuration problems,
1 when the receivers cannot start for another reason or the evaluation worker died.
"""


def startup_line(endpoints: Endpoints, serve: ServeConfig) -> tuple[int, str]:
    """The one line `serve` logs once it listens: where to send traces (and logs), where
    verdicts go.
    A warning when verdict export is off, since verdicts then reach only /metrics."""
    scheme = "https" if serve.tls.enabled else "http"
    parts = [
        f"OTLP/gRPC {endpoints.grpc}" if endpoints.grpc else "OTLP/gRPC off",
        f"OTLP/HTTP {scheme}://{endpoints.http}/v1/traces and /v1/logs (health /healthz)"
        if endpoints.http
        else "OTLP/HTTP off",
        f"metrics http://{endpoints.metrics}/metrics" if endpoints.metrics else "metrics off",
        f"spool {os.path.abspath(serve.spool.path)}"
        if serve.spool.enabled
        else "spool off (in memory)",
    ]
    if endpoints.workers:
        parts.append(f"{len(endpoints.workers)} evaluation processes")
    export = serve.export
    if export.enabled:
        target = export.endpoint or env_endpoint() or "the OTLP exporters' default"
        return logging.INFO, (
            f"listening: {', '.join(parts)}; verdicts to OTLP {export.protocol} {target}"
        )
    return logging.WARNING, (
        f"listening: {', '.join(parts)}; verdict export is OFF (no OTEL_EXPORTER_OTLP_ENDPOINT"
        " and no serve.export.endpoint): verdict spans and log records go nowhere, only"
        " /metrics counts them"
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="spanjudge serve",
        description="OTLP/gRPC and OTLP/HTTP receiver that evaluates agent sessions online.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--config",
        help="the YAML configuration file (section `serve:`); default: $SPANJUDGE_CONFIG",
    )
    parser.add_argument(
        "--ready-file",
        help="write the bound endpoints as JSON to this file once every receiver listens",
    )
    parser.add_argument(
        "--log-level",
        default="INFO",
        type=str.upper,  # any case; a level that is none is a usage error, not INFO in silence
        choices=("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"),
        help="DEBUG, INFO, WARNING, ERROR or CRITICAL (default INFO)",
    )
    return parser


def _write_ready(path: str, payload: dict[str, object]) -> None:
    temporary = path + ".tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(payload, handle)
    os.replace(temporary, path)  # readers never see a half-written file


def main(argv: Sequence[str] | None = None, *, process_ends: bool | None = None) -> int:
    """Run the sidecar until SIGTERM/SIGINT. Exit 0 after a shutdown (even one that left work in
    the spool), 2 on bad config (including a busy port or an unusable spool).

    ``process_ends`` (default: when ``argv`` is None, this process's own command line): the
    process ends when this returns, so the shutdown's time limit also covers the interpreter's
    exit; a caller's process that goes on is left alone once the shutdown returned."""
    ends = argv is None if process_ends is None else process_ends
    args = _parser().parse_args(list(argv) if argv is not None else None)
    logging.basicConfig(
        level=getattr(logging, args.log_level),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        config = load_config(args.config or os.environ.get("SPANJUDGE_CONFIG") or None)
        serve = serve_config(config)
    except ConfigError as exc:
        print(f"spanjudge serve: {exc}", file=sys.stderr)
        return 2
    if ends:  # the process is serve's own
        from spanjudge.pipeline import collect_less

        collect_less()
    with StopSignals() as signals:  # its module says why no Event
        return _run(args, config, serve, signals, ends)


def _run(
    args: argparse.Namespace, config: Config, serve: ServeConfig, signals: StopSignals, ends: bool
) -> int:
    from spanjudge.sidecar.server import Sidecar

    try:
        sidecar = Sidecar(config, serve)
        endpoints = sidecar.start()
    except ConfigError as exc:  # a busy port, an unusable spool: the fix is in the config
        print(f"spanjudge serve: {exc}", file=sys.stderr)
        return 2
    except (OSError, RuntimeError) as exc:
        print(f"spanjudge serve: cannot start: {exc}", file=sys.stderr)
        return 1
    level, line = startup_line(endpoints, serve)
    log.log(level, "%s", line)
    if args.ready_file:
        _write_ready(args.ready_file, endpoints.to_json())
    while not signals.wait(0.5):
        if sidecar.worker.crashed is not None:
            # A process that accepts spans nobody evaluates is worse than one that exits: the
            # supervisor restarts it, and the spool replays what was acknowledged.
            log.critical("stopping: the evaluation worker died (%s)", sidecar.worker.crashed)
            return _stop(sidecar, serve, 1, ends)
    log.info("shutting down (budget %.0fs)", serve.shutdown_timeout_s)
    return _stop(sidecar, serve, 0, ends)


def _stop(sidecar: Sidecar, serve: ServeConfig, code: int, ends: bool) -> int:
    """Shut ``sidecar`` down; the process ends within `serve.shutdown_timeout` whatever hangs
    (the shutdown, and when the process ``ends`` after it, the interpreter's exit)."""
    spool = serve.spool
    fate = (
        f"sessions not yet confirmed stay in the spool {os.path.abspath(spool.path)} and are"
        " judged at the next start"
        if spool.enabled
        else "sessions not yet confirmed are lost (the spool is off)"
    )
    watchdog = end_by(serve.shutdown_timeout_s, code, lambda: sidecar.stopping, fate)
    try:
        sidecar.stop()
    finally:
        if not ends:  # a caller's process goes on once serve returned: not the watchdog's
            watchdog.cancel()
    sidecar.stopping = "in the interpreter's exit"
    return code
