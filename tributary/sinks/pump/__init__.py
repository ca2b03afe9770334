"""The ``pump://`` sink: transactions written into a pump cluster as TiDB writes them.

``sink`` (``PumpSink``, ``open_url``) and ``write`` (P- then C-binlog) are the sink, ``counters``
the pump client counters a service exports for its ``pump://`` sinks; ``rows``
(TiDB's row layouts), ``values`` (typed values <-> the translator's text forms), ``schema`` and
``catalog`` (tables in the DDL history) and ``types`` (TiDB table infos) are what every writer
of binlogs into pumps shares: the load generator (``tributary.workload``) uses them too.
"""
