"""Prometheus metric families on a per-service registry, and their text exposition.

A service subclasses ``Metrics`` and declares its families in ``__init__`` through the helper
methods, which register them in ``self.registry``. Invariant: nothing here touches
prometheus_client's global registry, so several services (or several test instances of one) live
in one process without "duplicated timeseries" errors.

Names are built as Go's client builds them (``prometheus.BuildFQName``): ``namespace``,
``subsystem`` and ``name`` joined by ``_``, the empty parts left out. ``Metrics(namespace=
"binlog", subsystem="pump")`` declares ``gauge("gc_ts", ..., subsystem="pump_storage")`` as
``binlog_pump_storage_gc_ts``, tidb-binlog's name.

Services keep plain numbers on their hot paths and copy them into the families in a
``before_scrape`` hook, which runs first on every scrape.

A histogram observed per binlog is a ``plain_histogram``: its children are plain bucket
counts (``PlainBuckets.observe`` is one ``bisect`` and two additions, no lock) that a collector
reads on each scrape, exposed exactly as a prometheus_client histogram. A ``plain_counter``
is the same for counters some other object keeps (a pump client's ``ClientStats``): a
callback returns the totals on each scrape, exposed as a counter (``<name>_total``).

Go's client exposes a counter under its exact name while prometheus_client appends ``_total``;
``exact_counter`` keeps tidb-binlog's names (``binlog_pump_storage_error_count``) for dashboards
and alert rules written against them, exposed with ``# TYPE ... untyped``.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import cast

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
from prometheus_client import utils as _utils
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.metrics_core import CounterMetricFamily, HistogramMetricFamily, Metric

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


def fq_name(namespace: str, subsystem: str, name: str) -> str:
    """Go's ``prometheus.BuildFQName``: ``("binlog", "pump", "gc_ts")`` -> ``binlog_pump_gc_ts``."""
    return "_".join(part for part in (namespace, subsystem, name) if part)


_go_float = cast(Callable[[float], str], _utils.floatToGoString)  # "le" as Go writes it


class PlainBuckets:
    """One labelled child of a ``PlainHistogram``: per-bucket counts and the sum, as plain
    numbers. ``counts[i]`` holds the observations in ``(bounds[i-1], bounds[i]]``; the last
    one those above every bound (+Inf)."""

    __slots__ = ("_bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self._bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self._bounds, value)] += 1
        self.sum += value

    def merge(self, counts: Sequence[int], total: float) -> None:
        """Add observations made elsewhere with the same bounds (per-bucket counts, sum)."""
        if len(counts) != len(self.counts):
            raise ValueError(f"{len(counts)} bucket counts for {len(self.counts)} buckets")
        for i, n in enumerate(counts):
            self.counts[i] += n
        self.sum += total


class PlainHistogram:
    """A histogram family whose children are ``PlainBuckets``; collected as a histogram."""

    def __init__(
        self, name: str, documentation: str, labels: Sequence[str], buckets: Sequence[float]
    ) -> None:
        self.name = name
        self._doc = documentation
        self._labels = tuple(labels)
        self._bounds = tuple(sorted(float(b) for b in buckets if b != float("inf")))
        self._le = [_go_float(b) for b in self._bounds] + ["+Inf"]
        self._children: dict[tuple[str, ...], PlainBuckets] = {}
        if not self._labels:
            self.labels()  # exposed with zeros before the first observation, as Go's

    def labels(self, *values: str) -> PlainBuckets:
        if len(values) != len(self._labels):
            raise ValueError(f"{self.name} takes labels {self._labels}, got {values}")
        child = self._children.get(values)
        if child is None:
            child = self._children[values] = PlainBuckets(self._bounds)
        return child

    def observe(self, value: float) -> None:
        """Observe on the family without labels."""
        self.labels().observe(value)

    def collect(self) -> Iterator[Metric]:
        family = HistogramMetricFamily(self.name, self._doc, labels=self._labels)
        for values, child in list(self._children.items()):
            cumulative, total = [], 0
            for le, n in zip(self._le, child.counts, strict=True):
                total += n
                cumulative.append((le, float(total)))
            family.add_metric(list(values), cumulative, child.sum)
        yield family


PlainTotals = Mapping[str, float] | Mapping[tuple[str, ...], float]


class PlainCounter:
    """A counter family whose totals ``read`` returns on each scrape, as ``{label value:
    total}`` (one label) or ``{(label values...): total}`` (several); collected as a counter.
    The totals must only grow."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labels: str | Sequence[str],
        read: Callable[[], PlainTotals],
    ) -> None:
        self.name = name
        self._doc = documentation
        self._labels = (labels,) if isinstance(labels, str) else tuple(labels)
        self._read = read

    def _family(self) -> CounterMetricFamily:
        return CounterMetricFamily(self.name, self._doc, labels=self._labels)

    def describe(self) -> Iterator[Metric]:
        yield self._family()  # the registry learns the names without calling ``read``

    def collect(self) -> Iterator[Metric]:
        family = self._family()
        for values, total in self._read().items():
            family.add_metric([values] if isinstance(values, str) else list(values), total)
        yield family


class _BeforeScrape:
    """A collector that yields nothing but runs a hook first on every scrape."""

    def __init__(self, hook: Callable[[], None]) -> None:
        self._hook = hook

    def collect(self) -> Iterator[Metric]:
        self._hook()
        return iter(())


class Metrics:
    """Base for a service's metric families; each instance owns its ``CollectorRegistry``.

    ``namespace`` and ``subsystem`` prefix every family's name (a family may name its own
    subsystem). ``before_scrape`` runs on every scrape before any family is read.
    ``process_metrics=True`` adds the process/platform collectors (cpu, memory, fds).
    """

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        namespace: str = "",
        subsystem: str = "",
        before_scrape: Callable[[], None] | None = None,
        process_metrics: bool = False,
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.namespace = namespace
        self.subsystem = subsystem
        if before_scrape is not None:
            # Registered first, so it runs before the families are read.
            self.registry.register(_BeforeScrape(before_scrape))
        if process_metrics:
            ProcessCollector(registry=self.registry)
            PlatformCollector(registry=self.registry)

    def name(self, name: str, subsystem: str | None = None) -> str:
        """The family's full name: this registry's namespace, the subsystem, ``name``."""
        return fq_name(self.namespace, self.subsystem if subsystem is None else subsystem, name)

    def counter(
        self,
        name: str,
        documentation: str,
        labels: Sequence[str] = (),
        *,
        subsystem: str | None = None,
    ) -> Counter:
        """A prometheus_client counter (exposed as ``<name>_total``)."""
        return Counter(self.name(name, subsystem), documentation, labels, registry=self.registry)

    def exact_counter(
        self,
        name: str,
        documentation: str,
        labels: Sequence[str] = (),
        *,
        subsystem: str | None = None,
    ) -> ExactNameCounter:
        """A counter exposed under exactly ``name``, as Go clients do."""
        full = self.name(name, subsystem)
        return ExactNameCounter(full, documentation, labels, registry=self.registry)

    def gauge(
        self,
        name: str,
        documentation: str,
        labels: Sequence[str] = (),
        *,
        subsystem: str | None = None,
    ) -> Gauge:
        return Gauge(self.name(name, subsystem), documentation, labels, registry=self.registry)

    def histogram(
        self,
        name: str,
        documentation: str,
        labels: Sequence[str] = (),
        buckets: Sequence[float] = Histogram.DEFAULT_BUCKETS,
        *,
        subsystem: str | None = None,
    ) -> Histogram:
        full = self.name(name, subsystem)
        return Histogram(full, documentation, labels, registry=self.registry, buckets=buckets)

    def plain_histogram(
        self,
        name: str,
        documentation: str,
        labels: Sequence[str] = (),
        buckets: Sequence[float] = Histogram.DEFAULT_BUCKETS,
        *,
        subsystem: str | None = None,
    ) -> PlainHistogram:
        """A histogram for hot paths: observed on plain numbers, read at scrape time."""
        family = PlainHistogram(self.name(name, subsystem), documentation, labels, buckets)
        self.registry.register(family)
        return family

    def plain_counter(
        self,
        name: str,
        documentation: str,
        labels: str | Sequence[str],
        read: Callable[[], PlainTotals],
        *,
        subsystem: str | None = None,
    ) -> PlainCounter:
        """A counter (``<name>_total{labels}``) of totals kept elsewhere, ``read`` on each
        scrape."""
        family = PlainCounter(self.name(name, subsystem), documentation, labels, read)
        self.registry.register(family)
        return family

    def summary(
        self,
        name: str,
        documentation: str,
        labels: Sequence[str] = (),
        *,
        subsystem: str | None = None,
    ) -> Summary:
        return Summary(self.name(name, subsystem), documentation, labels, registry=self.registry)

    def render(self) -> bytes:
        return render(self.registry)
