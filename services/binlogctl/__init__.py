"""binlogctl: the operator's command-line tool for pumps and drainers.

Lists node records kept in etcd, repairs records of dead nodes, asks a running
node to pause or go offline through its HTTP API, and writes a ``savepoint``
file from a fresh TSO timestamp.

Modules: ``config`` (settings and the command word), ``commands`` (async
functions from settings to a result; errors mapped to ``errors.CtlError``),
``actions`` (the node's HTTP API and the wait on etcd), ``meta`` (the savepoint
file), ``results`` (plain result values), ``render`` (text and JSON) and ``cli``
(``main``: parse, run with ``asyncio.run``, print, exit code).
"""
