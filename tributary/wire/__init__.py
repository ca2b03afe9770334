"""Wire formats: generated betterproto code for tipb's ``binlog`` package
(``wire.binlog``), tidb-binlog's file-sink records (``wire.pb_binlog``) and the
project's own additions (``wire.binlogext``), plus small
helpers shared by every service (``wire.ts``, ``wire.peek``).

The generated modules are committed; ``scripts/gen-proto`` regenerates them and
``tox -e proto`` fails when they drift from ``proto/``.
"""
