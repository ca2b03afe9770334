"""A client of a Confluent-compatible schema registry: registering a subject's schema for its id.

``schema-registry=http[s]://[USER:PASSWORD@]HOST:PORT[/PATH]`` in the sink URL (TiCDC's
``--schema-registry``, URL-encoded there). ``register`` posts the schema to
``/subjects/<subject>/versions`` (the registry answers the id of that schema, new or already
known) and remembers it, so a schema is sent once per process. The registry checks each new
version of a subject against its compatibility rule (``BACKWARD`` by default in Confluent's and
Karapace's registries; Apicurio's ``ccompat`` API has none unless configured): a schema it
refuses (HTTP 409, or 422 for an invalid one) is a non-retriable SinkError carrying the
registry's message, as TiCDC's changefeed stops with it; a registry that cannot be reached or
answers 5xx is retriable.
"""

from __future__ import annotations

import json
import logging
from urllib.parse import quote, unquote, urlsplit

import aiohttp

from tributary.sinks.port import SinkError

log = logging.getLogger(__name__)

_CONTENT = "application/vnd.schemaregistry.v1+json"


class SchemaRegistryError(SinkError):
    """The registry refused a schema, or could not be reached (``retriable``)."""


def parse_registry_url(url: str) -> tuple[str, aiohttp.BasicAuth | None]:
    """The base URL (no user part, no trailing slash) and the basic auth of the user part."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SinkError(f"schema-registry must be an http:// or https:// URL: {url!r}")
    auth = None
    if parts.username is not None:
        auth = aiohttp.BasicAuth(unquote(parts.username), unquote(parts.password or ""))
    host = parts.netloc.rpartition("@")[2]
    return parts._replace(netloc=host, query="", fragment="").geturl().rstrip("/"), auth


class SchemaRegistry:
    """Registers schemas under subjects and remembers their ids (an async context manager)."""

    def __init__(self, url: str, timeout: float = 30.0) -> None:
        self.base, self._auth = parse_registry_url(url)
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None
        self._ids: dict[tuple[str, str], int] = {}

    async def __aenter__(self) -> SchemaRegistry:
        self._session = aiohttp.ClientSession(auth=self._auth, timeout=self._timeout)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def register(self, subject: str, schema: str) -> int:
        """The id of ``schema`` under ``subject``, registering it as a new version if needed."""
        known = self._ids.get((subject, schema))
        if known is not None:
            return known
        if self._session is None:
            raise SchemaRegistryError("schema registry: not open", retriable=True)
        url = f"{self.base}/subjects/{quote(subject, safe='')}/versions"
        body = json.dumps({"schema": schema})
        try:
            async with self._session.post(
                url, data=body, headers={"Content-Type": _CONTENT, "Accept": _CONTENT}
            ) as r:
                text = await r.text()
                status = r.status
        except (aiohttp.ClientError, TimeoutError) as e:
            raise SchemaRegistryError(
                f"schema registry {self.base}: cannot register {subject}: {e!r}", retriable=True
            ) from e
        if status != 200:
            raise SchemaRegistryError(
                f"schema registry {self.base} refused the schema of {subject} "
                f"(HTTP {status}): {_message(text)}",
                retriable=status >= 500 or status == 429,
            )
        try:
            schema_id = int(json.loads(text)["id"])
        except (ValueError, KeyError, TypeError) as e:
            raise SchemaRegistryError(
                f"schema registry {self.base}: no id in its answer for {subject}: {text[:200]!r}"
            ) from e
        self._ids[(subject, schema)] = schema_id
        log.info("registered %s: schema id %d", subject, schema_id)
        return schema_id


def _message(text: str) -> str:
    try:
        doc = json.loads(text)
    except ValueError:
        return text[:500]
    if isinstance(doc, dict) and "message" in doc:
        return str(doc["message"])[:500]
    return text[:500]
