"""The chaos harness: the whole pipeline under random faults, checked cycle after cycle.

``python -m bench.chaos --cycles N --seed S`` (``make chaos``) runs a 3-member etcd, three pumps
(each with an embedded TSO member), a drainer into a private MariaDB (consistent mode) and the
bank workload (plus the mixed workload with DDL) on a private MariaDB upstream, writing through
the pump client. Each cycle runs the load, picks a victim and a moment at random (``faults``),
SIGKILLs the victim or SIGSTOPs it for a while, brings it back, stops the load and checks
(``harness``): the bank total is the same on both sides, the checker finds every table equal
once the drainer caught up, the reader polling the downstream never saw a half transaction and
the TSO never went backwards (``watch``). One JSON line at the end; exit 1 on any violation.

The seed fixes every choice the harness makes (victim, moment, hold time, workload seeds), so a
run can be replayed; what the processes do with the timing is theirs.
"""
