"""``make demo``: a private pump cluster, a load generator and a check of what it stored.

Runs a throwaway etcd and two pumps as child processes, writes bank transfers
through the pump client for a few seconds, shows the cluster with binlogctl,
then pulls every pump and proves each acknowledged commit came back exactly
once, in commit order, with rows TiDB's codec can read. Entry point:
``python -m services.demo`` (see ``docs/demo.md``).
"""
