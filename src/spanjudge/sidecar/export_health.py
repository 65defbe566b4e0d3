"""`export_health` for serve's export configuration; `ExportHealth` itself is shared with the
in-process setup (`spanjudge.export_health`)."""

from __future__ import annotations

from spanjudge.export_health import ExportHealth, exporting, health_for
from spanjudge.sidecar.config import ExportConfig, env_endpoint

__all__ = ["ExportHealth", "export_health", "exporting"]


def export_health(config: ExportConfig) -> ExportHealth:
    """The health of export to ``config``'s endpoint in this process (shared by its verdict
    senders and its metric exporter); the metric exporter's own retry lines during its export
    calls (made ``with exporting(health)``) give way to it."""
    endpoint = config.endpoint or env_endpoint() or "the OTLP exporters' default endpoint"
    return health_for(f"OTLP {config.protocol or 'grpc'} {endpoint}", config.max_queue_spans)
