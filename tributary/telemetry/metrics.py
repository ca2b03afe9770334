"""Prometheus metric families on a per-service registry, and their text exposition.

A service subclasses ``Metrics`` and declares its families in ``__init__`` through the helper
methods, which register them in ``self.registry``. Invariant: nothing here touches
prometheus_client's global registry, so several services (or several test instances of one) live
in one process without "duplicated timeseries" errors.

Go's client exposes a counter under its exact name while prometheus_client appends ``_total``;
``exact_counter`` keeps tidb-binlog's names (``binlog_pump_storage_error_count``) for dashboards
and alert rules written against them, exposed with ``# TYPE ... untyped``.
"""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    Summary,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4
"""Content-Type of ``render``'s output (Prometheus text format 0.0.4)."""


def render(registry: CollectorRegistry) -> bytes:
    """The registry's metrics in the Prometheus text format, for ``GET /metrics``."""
    return generate_latest(registry)


def exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    """Go's ``prometheus.ExponentialBuckets``: ``start * factor**i`` for ``i < count``."""
    if start <= 0 or factor <= 1 or count < 1:
        raise ValueError("need start > 0, factor > 1 and count >= 1")
    return tuple(start * factor**i for i in range(count))


class ExactNameCounter(Gauge):
    """A counter exposed under exactly its name (no ``_total``), typed ``untyped``.

    Only ``inc`` with a non-negative amount is allowed, so it behaves as a counter.
    """

    _type = "unknown"

    def inc(self, amount: float = 1, exemplar: dict[str, str] | None = None) -> None:
        if amount < 0:
            raise ValueError("a counter only goes up")
        super().inc(amount)

    def dec(self, amount: float = 1) -> None:
        raise TypeError("a counter cannot be decremented")

    def set(self, value: float) -> None:
        raise TypeError("a counter cannot be set")


class Metrics:
    """Base for a service's metric families; each instance owns its ``CollectorRegistry``.

    ``process_metrics=True`` adds the process/platform collectors (cpu, memory, fds).
    """

    def __init__(
        self, registry: CollectorRegistry | None = None, *, process_metrics: bool = False
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        if process_metrics:
            ProcessCollector(registry=self.registry)
            PlatformCollector(registry=self.registry)

    def counter(self, name: str, documentation: str, labels: Sequence[str] = ()) -> Counter:
        """A prometheus_client counter (exposed as ``<name>_total``)."""
        return Counter(name, documentation, labels, registry=self.registry)

    def exact_counter(
        self, name: str, documentation: str, labels: Sequence[str] = ()
    ) -> ExactNameCounter:
        """A counter exposed under exactly ``name``, as Go clients do."""
        return ExactNameCounter(name, documentation, labels, registry=self.registry)

    def gauge(self, name: str, documentation: str, labels: Sequence[str] = ()) -> Gauge:
        return Gauge(name, documentation, labels, registry=self.registry)

    def histogram(
        self,
        name: str,
        documentation: str,
        labels: Sequence[str] = (),
        buckets: Sequence[float] = Histogram.DEFAULT_BUCKETS,
    ) -> Histogram:
        return Histogram(name, documentation, labels, registry=self.registry, buckets=buckets)

    def summary(self, name: str, documentation: str, labels: Sequence[str] = ()) -> Summary:
        return Summary(name, documentation, labels, registry=self.registry)

    def render(self) -> bytes:
        return render(self.registry)
