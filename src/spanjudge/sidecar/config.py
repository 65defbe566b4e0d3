"""The `serve:` section of the configuration file, validated with every problem reported at once.

Verdict export settings fall back to the standard `OTEL_EXPORTER_OTLP_*` environment variables:
a value in the file wins, an unset one is left to the OpenTelemetry exporters, which read the
environment themselves.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from spanjudge.config import register_section
from spanjudge.config_values import client_tls, durations, server_tls, setting_hint

DEFAULT_GRPC_ENDPOINT = "127.0.0.1:4327"
DEFAULT_HTTP_ENDPOINT = "127.0.0.1:4328"
DEFAULT_METRICS_ENDPOINT = "127.0.0.1:9464"
PROTOCOLS = ("grpc", "http/protobuf")
ON_SHUTDOWN = ("spool", "evaluate")
SYNCHRONOUS = ("normal", "full")


def usable_cores() -> int:
    """The CPUs this process may run on (its affinity mask, which `taskset` and container
    cpusets narrow; the machine's count where the platform has none)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


@dataclass(frozen=True, slots=True, kw_only=True)
class TlsConfig:
    """Server TLS. ``client_ca_file`` set means mutual TLS: clients must present a certificate."""

    cert_file: str | None = None
    key_file: str | None = None
    client_ca_file: str | None = None

    @property
    def enabled(self) -> bool:
        return self.cert_file is not None


@dataclass(frozen=True, slots=True, kw_only=True)
class AuthConfig:
    """Bearer-token auth on both receivers. The token comes from the file, or from ``token_env``."""

    bearer_token: str | None = None
    token_env: str | None = None

    def token(self) -> str | None:
        if self.bearer_token:
            return self.bearer_token
        if self.token_env:
            return os.environ.get(self.token_env) or None
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class SpoolConfig:
    """The SQLite spool. ``synchronous: full`` also survives power loss, at a cost per request."""

    enabled: bool = True
    path: str = "spanjudge-spool.db"
    max_bytes: int = 1024 * 1024 * 1024
    synchronous: str = "normal"
    keep_evaluated: int = 100_000
    # A spool SQLite cannot read is moved aside to `<path>.corrupt-<time>` and a new one started
    # (the Collector's file_storage `recreate`); off, such a spool stops the start with the fix.
    recreate: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportConfig:
    """Verdicts out over OTLP. ``None`` leaves the setting to `OTEL_EXPORTER_OTLP_*`."""

    enabled: bool | None = None  # None: on when an endpoint is configured here or in the env
    endpoint: str | None = None
    protocol: str | None = None
    insecure: bool | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float | None = None
    certificate_file: str | None = None
    client_key_file: str | None = None
    client_certificate_file: str | None = None
    # Verdict items (spans, log records) waiting for the endpoint at which evaluation pauses and
    # receivers answer retryable errors; nothing queued is ever dropped.
    max_queue_spans: int = 20_000
    metrics_interval_s: float = 10.0


@dataclass(frozen=True, slots=True, kw_only=True)
class InputConfig:
    """What a receiver accepts before it decodes a span."""

    max_request_bytes: int = 8 * 1024 * 1024
    # Spans starting before 2000-01-01 or too far in the future are rejected as absurd.
    min_start_unix_s: float = 946_684_800.0
    max_future_skew_s: float = 86_400.0
    max_span_duration_s: float = 7 * 86_400.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeConfig:
    """Everything `spanjudge serve` needs besides the core configuration."""

    grpc_endpoint: str | None = DEFAULT_GRPC_ENDPOINT
    http_endpoint: str | None = DEFAULT_HTTP_ENDPOINT
    metrics_endpoint: str | None = DEFAULT_METRICS_ENDPOINT
    tls: TlsConfig = field(default_factory=TlsConfig)
    auth: AuthConfig = field(default_factory=AuthConfig)
    spool: SpoolConfig = field(default_factory=SpoolConfig)
    export: ExportConfig = field(default_factory=ExportConfig)
    input: InputConfig = field(default_factory=InputConfig)
    max_pending_spans: int = 200_000
    # Memory bound: refuse (retryable) while the bodies of the accepted requests that no tick
    # has taken yet (held decoded until then) would pass this many bytes.
    max_pending_bytes: int = 64 * 1024 * 1024
    # Evaluation lag bound (`sidecar.lag`): refuse (retryable) while the oldest accepted request
    # not yet taken through closing and evaluation has waited this long, or while what waits
    # would take evaluation more than half of it at its measured rate. It bounds how long an
    # accepted session waits for its verdicts, whatever the span count.
    max_pending_age_s: float = 10.0
    retry_after_s: int = 2
    tick_interval_s: float = 0.25
    flush_timeout_s: float = 10.0
    shutdown_timeout_s: float = 20.0
    on_shutdown: str = "spool"
    grpc_workers: int = 8
    # Evaluation processes, each owning the sessions whose key hashes to it; 1 evaluates in
    # the serve process itself. Default: the cores this process may run on.
    workers: int = field(default_factory=usable_cores)
    # An evaluation process silent this long (no heartbeat: stopped, or stuck with the
    # interpreter held) is killed and replaced; its sessions are replayed from the spool.
    worker_stuck_timeout_s: float = 60.0


_NESTED: dict[str, type] = {
    "tls": TlsConfig,
    "auth": AuthConfig,
    "spool": SpoolConfig,
    "export": ExportConfig,
    "input": InputConfig,
}
_CHOICES: dict[tuple[type, str], tuple[str, ...]] = {
    (ExportConfig, "protocol"): PROTOCOLS,
    (ServeConfig, "on_shutdown"): ON_SHUTDOWN,
    (SpoolConfig, "synchronous"): SYNCHRONOUS,
}
_OPTIONAL_NUMBERS = {(ExportConfig, "timeout_s")}
_OPTIONAL_BOOLS = {(ExportConfig, "enabled"), (ExportConfig, "insecure")}


def _value(cls: type, name: str, default: Any, value: Any, path: str, problems: list[str]) -> Any:
    """Check one scalar setting against its default's type; returns the value or None if bad."""
    choices = _CHOICES.get((cls, name))
    if choices is not None:
        if value not in choices:
            problems.append(f"{path}: expected one of {', '.join(choices)}, got {value!r}")
            return None
        return value
    if isinstance(default, bool) or (cls, name) in _OPTIONAL_BOOLS:
        if not isinstance(value, bool):
            problems.append(f"{path}: expected true or false, got {value!r}")
            return None
        return value
    if isinstance(default, (int, float)) or (cls, name) in _OPTIONAL_NUMBERS:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            problems.append(f"{path}: expected a non-negative number, got {value!r}")
            return None
        return int(value) if isinstance(default, int) else float(value)
    if isinstance(default, Mapping):
        if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            problems.append(f"{path}: expected a mapping of strings to strings")
            return None
        return dict(value)
    # endpoints, paths and names: strings; an endpoint may be null/"" to switch it off
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        problems.append(f"{path}: expected a string, got {value!r}")
        return None
    return value


def _section(cls: type, raw: Any, path: str, problems: list[str]) -> Any:
    if raw is None:
        return cls()
    if not isinstance(raw, Mapping):
        problems.append(f"{path}: expected a mapping")
        return cls()
    defaults = cls()
    known = [f.name for f in fields(cls)]
    raw = durations(raw, [name for name in known if name.endswith("_s")], path, problems)
    if cls is ExportConfig and "tls" in raw:  # the Collector's exporter `tls:` block
        for key, value in client_tls(raw.pop("tls"), f"{path}.tls", problems).items():
            if key in raw:
                problems.append(f"{path}.tls: {key} is also set directly; set it once")
            raw[key] = value
    kwargs: dict[str, Any] = {}
    for key, value in raw.items():
        sub = f"{path}.{key}"
        if key not in known:
            hint = setting_hint(key, known)
            problems.append(f"{sub}: unknown setting{hint} (allowed: {', '.join(known)})")
            continue
        if key in _NESTED and cls is ServeConfig:
            if key == "tls":
                value = server_tls(value, sub, problems)
            kwargs[key] = _section(_NESTED[key], value, sub, problems)
            continue
        checked = _value(cls, key, getattr(defaults, key), value, sub, problems)
        if checked is not None or value is None or value == "":
            kwargs[key] = checked
    return cls(**kwargs)


def _endpoint_problem(endpoint: str) -> str | None:
    host, sep, port = endpoint.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        return f"expected host:port (port 0 picks a free one), got {endpoint!r}"
    return None


def _env_protocol(problems: list[str]) -> str | None:
    for name in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        value = os.environ.get(name)
        if value:
            if value not in PROTOCOLS:
                problems.append(
                    f"env {name}: expected one of {', '.join(PROTOCOLS)}, got {value!r}"
                )
                return None
            return value
    return None


def env_endpoint() -> str | None:
    """The verdict endpoint from the standard OTLP variables, if set."""
    for name in ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"):
        if os.environ.get(name):
            return os.environ[name]
    return None


_SQLITE_HEADER = b"SQLite format 3\x00"


def _env_export_problems(export: ExportConfig, protocol: str) -> list[str]:
    """What the `OTEL_EXPORTER_OTLP_*` variables verdict export reads would break, named: a
    compression gRPC endpoints do not take, a TLS file that is not there."""
    problems = []
    for signal in ("TRACES", "LOGS"):
        for name in (f"OTEL_EXPORTER_OTLP_{signal}_COMPRESSION", "OTEL_EXPORTER_OTLP_COMPRESSION"):
            value = os.environ.get(name)
            if value:
                if protocol == "grpc" and value.strip().lower() == "deflate":
                    problems.append(
                        f"env {name}: deflate is not supported over gRPC (the Collector answers"
                        " UNIMPLEMENTED, and the OpenTelemetry gRPC exporters take only gzip or"
                        " none); use gzip or none, or export.protocol: http/protobuf"
                    )
                break  # the signal's variable, when set, is the one read
        if export.certificate_file or export.client_key_file or export.client_certificate_file:
            continue  # the configured TLS files are used, not the variables
        for what in ("CERTIFICATE", "CLIENT_KEY", "CLIENT_CERTIFICATE"):
            for name in (f"OTEL_EXPORTER_OTLP_{signal}_{what}", f"OTEL_EXPORTER_OTLP_{what}"):
                file = os.environ.get(name)
                if file:
                    if not os.path.isfile(file):
                        problems.append(f"env {name}: no such file {file!r}")
                    break
    return sorted(set(problems))


def spool_path_problem(file: str) -> str | None:
    """Why the spool cannot be opened at ``file``, found without opening it; None if it may.

    Checked when `serve` starts, not when the file is loaded: other commands and other machines
    validate the same configuration, where the spool's directory need not exist."""
    directory = os.path.dirname(os.path.abspath(file))
    if os.path.isdir(file):
        return (
            f"{file!r} is a directory; name a file in it, e.g."
            f" {os.path.join(file, 'spanjudge-spool.db')!r}"
        )
    if not os.path.isdir(directory):
        return (
            f"cannot create the spool {file!r}: directory {directory!r} does not exist;"
            " create it, or point the path at a writable directory"
        )
    if os.path.isfile(file):
        try:
            with open(file, "rb") as handle:
                head = handle.read(len(_SQLITE_HEADER))
        except OSError as exc:
            return f"cannot read the spool {file!r}: {exc.strerror}; fix its permissions"
        # An empty file is fine: SQLite turns it into a new database.
        if head and head != _SQLITE_HEADER:
            return (
                f"{file!r} is not a spanjudge spool (not a SQLite database);"
                " move that file away or choose another path"
                " (or set serve.spool.recreate: true to have it moved aside)"
            )
    return None


def _relative_to(base: Path | None, config: ServeConfig, raw: Any) -> ServeConfig:
    """The files the configuration file names, relative to its directory (the default spool,
    not written there, stays in the current directory)."""

    def at(file: str | None) -> str | None:
        file = file and os.path.expanduser(file)
        return file if not file or base is None or os.path.isabs(file) else os.path.join(base, file)

    spool, tls, export = config.spool, config.tls, config.export
    written = raw.get("spool") if isinstance(raw, Mapping) else None
    if isinstance(written, Mapping) and "path" in written:
        spool = replace(spool, path=at(spool.path) or spool.path)
    tls = replace(
        tls,
        cert_file=at(tls.cert_file),
        key_file=at(tls.key_file),
        client_ca_file=at(tls.client_ca_file),
    )
    export = replace(
        export,
        certificate_file=at(export.certificate_file),
        client_key_file=at(export.client_key_file),
        client_certificate_file=at(export.client_certificate_file),
    )
    return replace(config, tls=tls, export=export, spool=spool)


def parse_serve(raw: Any, path: str, problems: list[str], base: Path | None = None) -> ServeConfig:
    """Validate the `serve` section (``raw`` may be None); appends every problem with its path.
    Files named relative are relative to ``base``, the configuration file's directory."""
    config: ServeConfig = _section(ServeConfig, raw, path, problems)
    config = _relative_to(base, config, raw)  # `~` expanded even without a file
    for name in ("grpc_endpoint", "http_endpoint", "metrics_endpoint"):
        endpoint = getattr(config, name)
        if endpoint is not None and (problem := _endpoint_problem(endpoint)):
            problems.append(f"{path}.{name}: {problem}")
    tls = config.tls
    if (tls.cert_file is None) != (tls.key_file is None):
        problems.append(f"{path}.tls: cert_file and key_file go together")
    if tls.client_ca_file and not tls.cert_file:
        problems.append(f"{path}.tls.client_ca_file: mutual TLS needs cert_file and key_file too")
    for name in ("cert_file", "key_file", "client_ca_file"):
        file = getattr(tls, name)
        if file and not os.path.isfile(file):
            problems.append(f"{path}.tls.{name}: no such file {file!r}")
    if config.auth.token_env and not config.auth.bearer_token and not config.auth.token():
        problems.append(
            f"{path}.auth.token_env: environment variable {config.auth.token_env} is unset"
        )
    if config.input.max_request_bytes < 1024:
        problems.append(f"{path}.input.max_request_bytes: at least 1024 bytes")
    if config.max_pending_bytes < config.input.max_request_bytes:
        problems.append(
            f"{path}.max_pending_bytes: at least input.max_request_bytes"
            f" ({config.input.max_request_bytes}), or the largest request could never wait"
        )
    if config.tick_interval_s <= 0:
        problems.append(f"{path}.tick_interval_s: must be above 0")
    if config.workers < 1:
        problems.append(f"{path}.workers: at least 1 (1 evaluates in the serve process)")
    if config.worker_stuck_timeout_s < 2:
        # below that, a process busy for a moment would be taken for a stuck one
        problems.append(f"{path}.worker_stuck_timeout: at least 2s")
    export = config.export
    # The OTLP exporters take URLs; a bare host:port (gRPC) is read as http://host:port.
    if (
        export.endpoint
        and not export.endpoint.startswith(("http://", "https://"))
        and _endpoint_problem(export.endpoint) is not None
    ):
        problems.append(
            f"{path}.export.endpoint: expected http(s)://host:port or host:port, "
            f"got {export.endpoint!r}"
        )
    # Read when the exporters are built, after the spool exists: a missing one must stop the
    # start here, named, not as an OSError that leaves a new spool behind.
    for key, name in (
        ("ca_file", "certificate_file"),
        ("cert_file", "client_certificate_file"),
        ("key_file", "client_key_file"),
    ):
        file = getattr(export, name)
        if file and not os.path.isfile(file):
            problems.append(f"{path}.export.tls.{key}: no such file {file!r}")
    protocol = export.protocol or _env_protocol(problems) or "grpc"
    enabled = export.enabled
    if enabled is None:
        enabled = bool(export.endpoint or env_endpoint())
    if enabled:
        problems.extend(_env_export_problems(export, protocol))
    return replace(config, export=replace(export, protocol=protocol, enabled=enabled))


register_section("serve", parse_serve, paths=True)
