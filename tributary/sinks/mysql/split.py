"""One upstream transaction too large for one downstream transaction, applied in pieces.

TiDB refuses a transaction bigger than its ``txn-total-size-limit`` (``sinks.mysql.tidb``),
whatever the upstream allowed: a MariaDB upstream has no such limit, and a TiDB upstream may
have a higher one. A stretch of several upstream transactions the downstream refuses is cut
in two at a transaction boundary by the sink, each half with its checkpoint row, so the
consistent mode's invariant holds. A single upstream transaction refused on its own cannot be
whole downstream: ``apply_in_pieces`` commits it in pieces, the checkpoint row with the last.

Invariant: between the first piece and the last, the checkpoint row says ``consistent: false``
(the sink saves it so before the first piece): the downstream may hold part of the
transaction after the checkpoint. The pieces are safe-mode statements (DELETE, REPLACE),
which are harmless when applied again, and a sink that reads such a checkpoint applies its
next stretch in safe mode: after a crash between pieces the replay completes the transaction.
Rows of a table without a primary or unique key may be doubled by such a replay, as in the
parallel mode (``sinks.mysql.parallel``).

The downstream's limit is not known (it is TiDB's configuration, not a variable the sink can
read), so pieces are found by halving: the statements (of at most ``PIECE_ROWS`` rows or about
``PIECE_BYTES`` each) in two halves, a half refused again in two, in order. A transaction
twice the limit takes about three attempts (the whole, refused; two halves, or three pieces).
"""

from __future__ import annotations

import logging

from tributary.change import Txn
from tributary.sinks.compact import late_tables
from tributary.sinks.mysql.apply import TxnTooLarge, run_transaction, stretch_statements
from tributary.sinks.mysql.conn import Session
from tributary.sinks.port import SinkError
from tributary.sql import Statement

log = logging.getLogger(__name__)

PIECE_ROWS = 100  # rows of a multi-row statement in a piece
PIECE_BYTES = 64 << 10  # about this many bytes of values per statement


async def apply_in_pieces(conn: Session, txn: Txn, save: Statement, *, seen: int = 0) -> int:
    """``txn``'s rows in safe mode in as few downstream transactions as the downstream takes,
    in order, ``save`` (the checkpoint row) committed with the last; the number of pieces.
    ``seen``: the newest schema version before it (``compact.late_tables``). A single
    statement refused for its size is a SinkError, not retriable."""
    ts = (txn.commit_ts, txn.commit_ts)
    late = late_tables([txn], seen)
    stmts = stretch_statements(
        txn.rows, safe=True, late=late, ts=ts, max_rows=PIECE_ROWS, max_bytes=PIECE_BYTES
    )
    if len(stmts) <= 1:
        raise SinkError(
            f"mysql sink: transaction at commit ts {txn.commit_ts}: its one statement is too"
            " large for a downstream transaction"
        )
    half = len(stmts) // 2
    todo = [stmts[:half], stmts[half:]]  # the whole was refused already
    pieces = 0
    while todo:
        piece = todo.pop(0)
        body = [*piece, save] if not todo else piece
        try:
            await run_transaction(conn, body, lambda: [], ts)
        except TxnTooLarge as e:
            if len(piece) <= 1:
                raise SinkError(
                    f"mysql sink: transaction at commit ts {txn.commit_ts}: a single statement"
                    f" of it is too large for a downstream transaction: {e.__cause__}"
                ) from e
            half = len(piece) // 2
            todo[:0] = [piece[:half], piece[half:]]
            continue
        pieces += 1
        log.debug("transaction at commit ts %s: piece %d applied", txn.commit_ts, pieces)
    return pieces
