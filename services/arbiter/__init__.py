"""``binlog-arbiter``: tidb-binlog's arbiter. Reads the secondary binlog a drainer writes to Kafka
and applies each transaction to MySQL, MariaDB, TiDB or SQLite through the sinks, resuming
exactly where it stopped (``services.arbiter.app`` tells how)."""
