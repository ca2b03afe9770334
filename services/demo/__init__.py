"""``make demo``: the whole replication pipeline on one machine, checked end to end.

Runs a throwaway etcd, two pumps and a drainer as child processes; the bank and mixed
workloads write an upstream database (SQLite in the data dir, or MariaDB) and send every
transaction to the pumps as TiDB would; the drainer replicates into a downstream database;
when it has caught up, the consistency checker compares both sides and the bank's total is
read on each. Entry point: ``python -m services.demo`` (see ``docs/demo.md``).
"""
