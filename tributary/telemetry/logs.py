"""Structured logging: text and JSON formatters, context adapters, one-call CLI configuration.

Library modules log through ``logging.getLogger(__name__)`` (or a ``ContextAdapter`` around it
carrying ``node_id``, ``commit_ts``...); only CLIs call ``configure_logging``. Context travels as
``LogRecord`` attributes (``extra``), which both formatters print after the message. Invariant:
``configure_logging`` owns exactly one root handler; calling it again replaces (and closes) the
handler it installed before and leaves other handlers alone.
"""

from __future__ import annotations

import json
import logging
import logging.handlers
import sys
from collections.abc import Mapping, MutableMapping
from datetime import datetime
from typing import Any, Literal

from tributary.settings.logs import LogSettings

_RESERVED = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
}
LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "fatal": logging.CRITICAL,
    "critical": logging.CRITICAL,
}


def record_context(record: logging.LogRecord) -> dict[str, object]:
    """The ``extra`` attributes of a record (everything logging itself does not set)."""
    return {
        k: v for k, v in record.__dict__.items() if k not in _RESERVED and not k.startswith("_")
    }


def _timestamp(record: logging.LogRecord) -> datetime:
    return datetime.fromtimestamp(record.created).astimezone()


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, context, exception."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, object] = record_context(record)
        doc |= {
            "time": _timestamp(record).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            doc["stack"] = self.formatStack(record.stack_info)
        return json.dumps(doc, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    """TiDB's unified log format: ``[time] [LEVEL] [logger] [message] [key=value]...``."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = _timestamp(record).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]
        offset = _timestamp(record).strftime("%z")
        fields = [
            f"[{stamp} {offset[:3]}:{offset[3:]}]",
            f"[{record.levelname}]",
            f"[{record.name}]",
            f"[{_quote(record.getMessage())}]",
        ]
        fields += [f"[{k}={_quote(_plain(v))}]" for k, v in record_context(record).items()]
        text = " ".join(fields)
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        if record.stack_info:
            text += "\n" + self.formatStack(record.stack_info)
        return text


def _plain(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _quote(text: str) -> str:
    if text and not any(c in text for c in ' "[]=\n\t\\'):
        return text
    return json.dumps(text, ensure_ascii=False)


class ContextAdapter(logging.LoggerAdapter[logging.Logger]):
    """A logger adapter that adds fixed context (``node_id=...``) to every record.

    ``bind(commit_ts=...)`` returns a new adapter with more context; ``extra=`` given at the
    call site wins over bound context.
    """

    def __init__(self, logger: logging.Logger, context: Mapping[str, object] | None = None):
        bound = dict(context or {})
        clash = _RESERVED.intersection(bound)
        if clash:
            raise ValueError(f"log context keys clash with LogRecord attributes: {sorted(clash)}")
        super().__init__(logger, bound)
        self.context: Mapping[str, object] = bound

    def bind(self, **context: object) -> ContextAdapter:
        return ContextAdapter(self.logger, {**self.context, **context})

    def process(
        self, msg: Any, kwargs: MutableMapping[str, Any]
    ) -> tuple[Any, MutableMapping[str, Any]]:
        kwargs["extra"] = {**self.context, **(kwargs.get("extra") or {})}
        return msg, kwargs


class _OwnedHandler(logging.Handler):
    """Marker base: handlers installed by ``configure_logging``."""


class _StreamHandler(logging.StreamHandler, _OwnedHandler):  # type: ignore[type-arg]
    pass


class _FileHandler(logging.handlers.WatchedFileHandler, _OwnedHandler):
    pass


def configure_logging(
    level: str = "info", fmt: Literal["text", "json"] = "text", file: str | None = None
) -> None:
    """Configure the root logger (CLIs only).

    ``level``: debug, info, warn/warning, error, fatal/critical (any case). ``file``: a path
    (reopened when rotated externally) or None for stderr. Raises ValueError on a bad level or
    format.
    """
    try:
        levelno = LEVELS[level.lower()]
    except KeyError:
        raise ValueError(f"unknown log level {level!r}; use one of {', '.join(LEVELS)}") from None
    formatters: dict[str, type[logging.Formatter]] = {"text": TextFormatter, "json": JsonFormatter}
    if fmt not in formatters:
        raise ValueError(f"unknown log format {fmt!r}; use text or json")
    handler: logging.Handler = _FileHandler(file) if file else _StreamHandler(sys.stderr)
    handler.setFormatter(formatters[fmt]())
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _OwnedHandler)]:
        root.removeHandler(old)
        old.close()
    root.addHandler(handler)
    root.setLevel(levelno)


def configure_logging_from(settings: LogSettings) -> None:
    """``configure_logging`` with a process's ``log-level``, ``log-format`` and ``log-file``."""
    fmt: Literal["text", "json"] = "json" if settings.format == "json" else "text"
    configure_logging(settings.level, fmt, settings.file or None)
