"""A small client of the capture's HTTP API v2, for ``binlog-cdc cli``.

Invariant: every failure leaves as ``ClientError`` carrying the HTTP status (0 when the server
could not be reached) and the server's message.
"""

from __future__ import annotations

import json
import ssl
from types import TracebackType
from typing import Any

import aiohttp

from tributary.errors import TributaryError


class ClientError(TributaryError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(
            f"{message} (HTTP {status})" if status else message,
            retriable=status == 0 or status >= 500,
        )
        self.status = status


class ApiClient:
    def __init__(
        self, server: str, timeout: float = 30.0, ssl_context: ssl.SSLContext | None = None
    ) -> None:
        scheme = "https" if ssl_context is not None else "http"
        base = server.rstrip("/")
        self._base = base if "://" in base else f"{scheme}://{base}"
        connector = aiohttp.TCPConnector(ssl=ssl_context if ssl_context is not None else True)
        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=timeout), connector=connector
        )

    async def __aenter__(self) -> ApiClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._session.close()

    async def call(
        self, method: str, path: str, body: object = None, params: dict[str, str] | None = None
    ) -> Any:
        url = self._base + path
        try:
            async with self._session.request(method, url, json=body, params=params or None) as resp:
                text = await resp.text()
                status = resp.status
        except aiohttp.ClientError as e:
            raise ClientError(0, f"cannot reach {self._base}: {e}") from e
        try:
            data = json.loads(text) if text else {}
        except ValueError as e:
            raise ClientError(status, f"the server answered non-JSON: {text[:200]!r}") from e
        if status >= 400:
            message = data.get("error_msg") or data.get("error") if isinstance(data, dict) else None
            raise ClientError(status, str(message or text))
        return data
