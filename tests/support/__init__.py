"""Test support: real-process fixtures (etcd, pumps) and small helpers."""
