"""The status page: one process that reads the whole cluster (registry, nodes, captures)."""
