"""Log formatting, context adapters and root-logger configuration."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tributary.telemetry import ContextAdapter, JsonFormatter, TextFormatter, configure_logging


def make_record(msg: str, *args: object, **extra: object) -> logging.LogRecord:
    logger = logging.getLogger("svc.pump")
    record = logger.makeRecord("svc.pump", logging.WARNING, __file__, 1, msg, args, None)
    record.__dict__.update(extra)
    return record


def test_json_formatter_carries_message_and_context() -> None:
    line = JsonFormatter().format(
        make_record("wrote %d binlogs", 3, node_id="pump-1", commit_ts=42)
    )
    doc = json.loads(line)
    assert doc["message"] == "wrote 3 binlogs"
    assert doc["level"] == "warning"
    assert doc["logger"] == "svc.pump"
    assert doc["node_id"] == "pump-1" and doc["commit_ts"] == 42
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d", doc["time"])
    assert "msg" not in doc and "args" not in doc


def test_json_formatter_includes_exception() -> None:
    try:
        raise RuntimeError("disk full")
    except RuntimeError:
        record = logging.getLogger("x").makeRecord(
            "x", logging.ERROR, __file__, 1, "append failed", (), __import__("sys").exc_info()
        )
    doc = json.loads(JsonFormatter().format(record))
    assert "RuntimeError: disk full" in doc["exception"]


def test_text_formatter_uses_tidb_unified_layout() -> None:
    line = TextFormatter().format(make_record("pump is online", node_id="pump-1", addr="a b"))
    assert re.fullmatch(
        r"\[\d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{3} [+-]\d\d:\d\d\] \[WARNING\] \[svc\.pump\] "
        r'\["pump is online"\] \[node_id=pump-1\] \[addr="a b"\]',
        line,
    )


@pytest.fixture
def captured() -> Iterator[list[logging.LogRecord]]:
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    logger = logging.getLogger("test.adapter")
    handler = Keep()
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    yield records
    logger.removeHandler(handler)


def test_context_adapter_binds_and_call_site_wins(captured: list[logging.LogRecord]) -> None:
    base = ContextAdapter(logging.getLogger("test.adapter"), {"node_id": "pump-1"})
    child = base.bind(commit_ts=7)
    child.info("stored", extra={"commit_ts": 8, "size": 10})
    base.info("plain")
    first, second = captured
    assert (first.node_id, first.commit_ts, first.size) == ("pump-1", 8, 10)  # type: ignore[attr-defined]
    assert second.node_id == "pump-1" and not hasattr(second, "commit_ts")  # type: ignore[attr-defined]
    assert base.context == {"node_id": "pump-1"}
    with pytest.raises(ValueError, match="clash"):
        base.bind(msg="x")


@pytest.fixture
def restore_root() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for h in list(root.handlers):
        if h not in handlers:
            root.removeHandler(h)
            h.close()
    root.setLevel(level)


@pytest.mark.usefixtures("restore_root")
def test_configure_logging_to_a_json_file_and_reconfigure(tmp_path: Path) -> None:
    path = tmp_path / "pump.log"
    configure_logging("DEBUG", "json", str(path))
    root = logging.getLogger()
    before = len(root.handlers)
    ContextAdapter(logging.getLogger("svc.x"), {"node_id": "n1"}).debug("hello %s", "world")
    configure_logging("warn", "text", str(tmp_path / "other.log"))
    assert len(root.handlers) == before  # replaced, not added
    assert root.level == logging.WARNING
    logging.getLogger("svc.x").info("dropped below warn")
    logging.getLogger("svc.x").error("kept")
    (line,) = path.read_text().splitlines()
    doc = json.loads(line)
    assert (doc["message"], doc["level"], doc["node_id"]) == ("hello world", "debug", "n1")
    other = (tmp_path / "other.log").read_text()
    assert "[ERROR] [svc.x] [kept]" in other and "dropped" not in other


@pytest.mark.usefixtures("restore_root")
def test_configure_logging_rejects_bad_values() -> None:
    with pytest.raises(ValueError, match="unknown log level 'loud'"):
        configure_logging("loud", "text", None)
    with pytest.raises(ValueError, match="unknown log format"):
        configure_logging("info", "xml", None)  # type: ignore[arg-type]
