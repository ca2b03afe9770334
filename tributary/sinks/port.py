"""The sink port: what every sink implements (``Sink``), is opened with (``SinkOptions``) and
raises (``SinkError``).

A ``Sink`` applies batches of ``tributary.change.Txn`` in commit order and keeps its own
checkpoint, the commit ts of the last transaction it applied; SQL sinks write it in the same
downstream transaction as the batch, so after a crash the downstream holds exactly the
transactions up to the checkpoint.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from tributary.change import Txn
from tributary.errors import TributaryError

if TYPE_CHECKING:
    from tributary.pumpclient.stats import ClientStats


class SinkError(TributaryError):
    """A sink could not apply a batch; ``retriable`` says whether trying again may help."""


class UnsupportedDdl(SinkError):
    """The sink cannot translate this DDL; the drainer stops with the query in the message."""


class WriteRefused(TributaryError):
    """The sink's write gate refused a downstream write (``GatesWrites``): the batch is not
    committed, and the sink stays usable once the gate lets writes through again. Not a
    ``SinkError``: the sink does not retry it, and it is no failure of the downstream."""

    retriable = True


def pending(txns: Sequence[Txn], checkpoint: int | None) -> list[Txn]:
    """The transactions of a batch still to apply after ``checkpoint``, checking the order.

    Commit ts must strictly increase through the batch; anything at or below the checkpoint was
    applied before (a replay after a restart) and is dropped. With checkpoint 20:
    [15, 20, 30, 40] -> [30, 40]; [30, 30] and [40, 30] raise SinkError (not retriable).
    """
    last = 0
    for t in txns:
        if t.commit_ts <= last:
            raise SinkError(f"commit ts {t.commit_ts} does not follow {last} in the batch")
        last = t.commit_ts
    return [t for t in txns if checkpoint is None or t.commit_ts > checkpoint]


@dataclass(frozen=True, slots=True)
class SinkOptions:
    """What every sink is opened with; scheme-specific settings travel in the sink URL."""

    cluster_id: int  # the upstream cluster ID: the key of the checkpoint row
    safe_mode: bool = False  # INSERT as REPLACE, UPDATE as DELETE + REPLACE
    worker_count: int = 16  # downstream connections of sinks that apply in parallel
    batch_size: int = 20  # row changes per downstream statement batch of such sinks
    # the key of a SQL sink's DDL record (which DDLs ran downstream); None: ``cluster_id``.
    # The runs of a spread changefeed, each with a checkpoint row of its own, share one.
    ddl_key: int | None = None
    # the counters a pump:// sink's client adds to (``sinks.pump.counters``: the owner's, so
    # they outlive the sink); None: the client's own. Other sinks ignore it.
    pump_stats: ClientStats | None = field(default=None, compare=False)
    # the capture cluster's id (``--cluster-id``): the debezium protocol's source name, as
    # TiCDC writes its cluster id there. Other sinks ignore it.
    cluster_name: str = "default"


class Sink(Protocol):
    """A downstream that applies whole upstream transactions and keeps its checkpoint.

    ``safe_mode`` may be switched between batches (the drainer keeps it on for the first
    minutes after a start, so replays of rows applied before a crash are harmless).
    """

    safe_mode: bool

    async def apply(self, txns: Sequence[Txn]) -> None:
        """Apply a batch of whole transactions in commit order, then move the checkpoint to the
        last one's commit ts; on error neither the rows nor the checkpoint move."""
        ...

    async def checkpoint(self) -> int | None:
        """The commit ts of the last applied transaction; None before the first."""
        ...

    async def close(self) -> None:
        """Release the downstream; the checkpoint stays where the last batch left it."""
        ...


@runtime_checkable
class Pipelined(Protocol):
    """A sink that takes the next batch while the downstream still acknowledges earlier ones
    (the Kafka sink: the broker's acks).

    ``submit`` hands a batch over and returns, possibly before it is acknowledged (it waits only
    for room); ``checkpoint`` moves as acks come in, in order, and only over whole transactions;
    ``flush`` waits until everything submitted is acknowledged. ``apply`` is ``submit`` then
    ``flush``. A delivery that failed surfaces as the ``SinkError`` of a later ``submit`` or
    ``flush``; the caller then applies everything past the checkpoint again (``apply``: what the
    sink finds delivered is not sent twice where it can tell, as ``apply`` always does).

    Example: submit [t1 t2], submit [t3 t4]; the acks of t1 t2 come in: checkpoint t2; t3's
    delivery fails: the next submit or flush raises, and the caller applies [t3 t4 ...] again.
    """

    async def submit(self, txns: Sequence[Txn]) -> None: ...

    async def flush(self) -> None: ...


WriteGate = Callable[[], None]
"""Asked right before a downstream write starts; raises ``WriteRefused`` to refuse it."""


@runtime_checkable
class GatesWrites(Protocol):
    """A sink that asks a gate right before each downstream write starts (the MySQL sink:
    before a transaction's statements, before its COMMIT, before a DDL and before a checkpoint
    save on its own), so a write refused there never reaches the downstream. A write already
    started when the gate closes runs to its end. None (the default) lets every write through.

    The capture cluster's processors set it to their capture's lease fence."""

    write_gate: WriteGate | None


QueryTimer = Callable[[str, float], None]
"""Called with a query type (``exec``, ``commit``) and the seconds the query took."""


@runtime_checkable
class TimesQueries(Protocol):
    """A sink that can report how long its downstream queries take (the MySQL sink).

    ``query_timer`` is called once per query of each downstream transaction; None (the
    default) reports nothing."""

    query_timer: QueryTimer | None
