"""reparo: replays the binlog files of the file sink (or of tidb-binlog's drainer) into a sink.

Modules: ``config`` (reparo.toml's keys, ``REPARO_*`` environment, flags), ``reader`` (segments
of the data directory -> transactions in a commit-ts range), ``app`` (filter, then apply in
batches of whole transactions), ``cli``. reparo keeps no state of its own: the destination's
checkpoint makes a re-run skip what it applied before.
"""
