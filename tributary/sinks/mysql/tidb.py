"""What a TiDB downstream needs beyond MySQL's protocol: session variables and error codes.

The sink finds TiDB by its version string (``5.7.25-TiDB-v7.1.0``), whatever the URL's scheme
(``mysql://`` or ``tidb://``), and sets on each of its sessions what tidb-binlog's loader and
TiCDC's MySQL sink set (a variable an older TiDB does not have, error 1193, is skipped):

* ``tidb_txn_mode = 'optimistic'``: the sink is the only writer of its rows, so a pessimistic
  transaction's lock round trip per statement buys nothing. Optimistic transactions check
  unique keys only at COMMIT, so a duplicate key fails the COMMIT, not its statement: the sink
  looks for the failing upstream transaction in a pessimistic one (``BEGIN_CHECKED``), whose
  statements fail where they are wrong. A write conflict with another writer fails the COMMIT
  with 9007, which is retried like a deadlock.
* ``allow_auto_random_explicit_insert = ON``: rows of an ``AUTO_RANDOM`` table carry their
  upstream key; TiDB refuses an explicit value without it (8216).
* ``tidb_placement_mode = 'IGNORE'``: an upstream DDL's placement options (policies the
  downstream does not have) are ignored instead of failing the DDL.
* ``tidb_enable_external_ts_read = OFF``: with it on (set globally, to read a sync point's
  snapshot: ``sinks.mysql.syncpoint``) a session reads at that snapshot and cannot write.

TiDB refuses a transaction bigger than its ``txn-total-size-limit`` (100 MiB by default; 8004)
and a single row or index entry bigger than ``txn-entry-size-limit`` (6 MiB; 8025). The sink
splits a transaction refused for its size (``sinks.mysql.split``); an entry too large cannot be
split and fails the batch, naming the upstream transaction. Retriable TiDB codes are those
tidb-tools' ``IsRetryableError`` lists, besides the MySQL ones in ``sinks.mysql.conn``.
"""

from __future__ import annotations

SESSION = (
    ("tidb_txn_mode", "optimistic"),
    ("allow_auto_random_explicit_insert", "ON"),
    ("tidb_placement_mode", "IGNORE"),
    ("tidb_enable_external_ts_read", "OFF"),
)
UNKNOWN_SYSTEM_VARIABLE = 1193
BEGIN_CHECKED = "BEGIN PESSIMISTIC"  # unique keys checked at each statement

TXN_TOO_LARGE = 8004  # ErrTxnTooLarge: txn-total-size-limit
ENTRY_TOO_LARGE = 8025  # ErrEntryTooLarge: txn-entry-size-limit

# A conflict with another transaction at COMMIT: only this transaction was rolled back.
CONFLICT_CODES = frozenset(
    {
        8005,  # write conflict (TiDB's own check)
        9007,  # write conflict (an optimistic transaction's prewrite)
    }
)
RETRIABLE_CODES = CONFLICT_CODES | frozenset(
    {
        8022,  # the transaction may be retried (KV error safe to retry)
        8027,  # information schema out of date
        8028,  # information schema changed during the transaction
        9001,  # PD server timeout
        9002,  # TiKV server timeout
        9003,  # TiKV server busy
        9004,  # resolve lock timeout
        9005,  # region unavailable
    }
)


def is_tidb(version: str) -> bool:
    """Whether ``SELECT VERSION()`` answered ``version`` is TiDB's (``5.7.25-TiDB-v7.1.0``)."""
    return "-TiDB-" in version
