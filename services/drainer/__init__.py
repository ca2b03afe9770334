"""The drainer: pulls every pump, merges by commit ts and applies to sinks.

Not built yet; see docs/roadmap.md.
"""
