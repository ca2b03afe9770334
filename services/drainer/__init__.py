"""The drainer: pulls every pump, merges by commit ts, applies to a sink, keeps a checkpoint.

Modules, from the wire inwards: ``api`` (gRPC ``binlog.Cistern``: Notify),
``http`` (ops API), ``collector`` (follows pump records, one ``puller`` per
pump), ``feed`` (the merge loop around the pure ``merge.Merger``), ``convert``
(binlog -> ``change.Txn`` through ``translate``, ``schema`` and the table
filter), ``syncer`` (batches into the sink), ``progress`` and ``checkpoint``
(the checkpoint and where it is kept), ``app`` (composition root), ``cli``.
"""
