"""Runtime pieces every service shares: logging, metrics, the ops HTTP server and TLS.

Modules: ``telemetry.logs`` (formatters, ``ContextAdapter``, ``configure_logging``,
``configure_logging_from``), ``telemetry.metrics`` (``Metrics`` base on a per-service registry
with Go's namespace/subsystem naming, ``render``),
``telemetry.http`` (``OpsServer``, JSON helpers), ``telemetry.tls`` (SSL contexts from
``SecuritySettings``, CN checks), ``telemetry.tlsreload`` (contexts that follow their files)
and ``telemetry.grpcauth`` (CN enforcement for grpclib).
"""

from tributary.telemetry.logs import (
    ContextAdapter,
    JsonFormatter,
    TextFormatter,
    configure_logging,
    configure_logging_from,
)
from tributary.telemetry.metrics import (
    CONTENT_TYPE,
    ExactNameCounter,
    Metrics,
    PlainBuckets,
    PlainCounter,
    PlainHistogram,
    exponential_buckets,
    fq_name,
    render,
)

__all__ = [
    "CONTENT_TYPE",
    "ContextAdapter",
    "ExactNameCounter",
    "JsonFormatter",
    "Metrics",
    "PlainBuckets",
    "PlainCounter",
    "PlainHistogram",
    "TextFormatter",
    "configure_logging",
    "configure_logging_from",
    "exponential_buckets",
    "fq_name",
    "render",
]
