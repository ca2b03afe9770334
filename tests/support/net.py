"""Loopback networking helpers for tests."""

from __future__ import annotations

from services.demo.procs import free_port

__all__ = ["free_port"]
