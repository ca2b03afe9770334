"""Spark jobs for heavy downstream loads: catch-up of a staged backlog, bulk load of a table,
Parquet lake output, and the Spark-on-Kubernetes submission. Each job is a pure DataFrame
transform plus a thin I/O main runnable as ``python -m services.spark.<job>``."""
