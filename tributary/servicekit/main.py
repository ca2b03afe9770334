"""The main of a service process: settings, logging, signals, event loop.

Signals only set an event: the first SIGTERM/SIGINT asks the service to stop
gracefully; a second one cancels it at once. Exit codes: 0 after a graceful
stop, 1 on failure or forced exit, 2 for bad settings.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeVar

import uvloop

from tributary.settings import IgnoredSetting, LogSettings, SettingsError, dump, load
from tributary.telemetry import configure_logging_from
from tributary.version import version_text

log = logging.getLogger(__name__)


class LoggedSettings(Protocol):
    @property
    def log(self) -> LogSettings: ...


C = TypeVar("C", bound=LoggedSettings)


async def _serve_with_signals(serve: Callable[[C, asyncio.Event], Awaitable[Any]], cfg: C) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    assert main is not None

    def on_signal() -> None:
        if stop.is_set():
            log.warning("second signal: exiting now")
            main.cancel()
        else:
            stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal)
    await serve(cfg, stop)


def run_service(
    prog: str,
    settings_cls: type[C],
    env_prefix: str,
    serve: Callable[[C, asyncio.Event], Awaitable[Any]],
    argv: Sequence[str] | None = None,
) -> int:
    """Load settings, configure logging and run ``serve(cfg, stop)`` under uvloop.

    ``-V``/``--version`` prints the version and exits 0; keys and flags the settings ignore are
    logged as one warning each once logging is configured.
    """
    args = sys.argv[1:] if argv is None else argv
    ignored: list[IgnoredSetting] = []
    try:
        cfg = load(
            settings_cls,
            args,
            os.environ,
            env_prefix,
            prog=prog,
            version=version_text(),
            ignored=ignored,
        )
    except SettingsError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 2
    configure_logging_from(cfg.log)
    for notice in ignored:
        log.warning("%s", notice)
    log.info("%s effective configuration:\n%s", prog, dump(cfg))
    try:
        uvloop.run(_serve_with_signals(serve, cfg))
    except asyncio.CancelledError:
        return 1
    except Exception:
        log.exception("%s failed", prog)
        return 1
    return 0
