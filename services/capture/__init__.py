"""The capture cluster (TiCDC-style): captures, owner, changefeeds, processors, HTTP API v2.

Entry point ``binlog-cdc`` (``services.capture.cli``). See docs/capture.md.
"""
