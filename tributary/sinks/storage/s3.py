"""The storage sink's S3 store (``s3://bucket/prefix``, ``store.Store``), through botocore.

Every file is one object under ``<prefix>/`` with the layout's relative path as the rest of its
key. A PUT is atomic (the object appears whole or not at all: no ``.tmp/`` is needed) and
returns once the service has stored it durably, so a file the sink counts as written is there
for every reader.

* ``create`` is a conditional PUT, ``If-None-Match: *``: the service refuses it (412) when the
  key exists, so an object a consumer may have read is never overwritten, whoever writes.
  A 409 (another conditional write of the key under way) is tried again; when it answers 412
  the other one won, and the name is taken. ``open`` checks that the service keeps that promise
  (a probe object created twice must be refused the second time, then removed): a service that
  ignores the header would overwrite silently, so the sink refuses to open on it instead (S3 has
  no hard links, and a listing before the PUT cannot stop a second writer: only the condition
  does).
* ``replace`` is a plain PUT (``metadata``, ``meta/CDC.index``).
* ``list_names`` lists one "directory" with the ``/`` delimiter; ``walk`` every key under the
  prefix, both paginated.

Every botocore error becomes a ``StoreError`` (an ``OSError``: the sink's failures to write are
retriable) naming the call and the key; a missing bucket or denied access says so at ``open``.
"""

from __future__ import annotations

import threading
import uuid
from pathlib import PurePosixPath
from typing import Any

import botocore.session
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from tributary.sinks.storage.errors import StoreError, UnsafeStore
from tributary.sinks.storage.layout import TMP_DIR
from tributary.sinks.storage.settings import S3Settings

_TAKEN = 412  # PreconditionFailed: If-None-Match: * on an existing key
_CONFLICT = 409  # ConditionalRequestConflict: a concurrent conditional write of the key
_MISSING = ("404", "NoSuchKey", "NotFound")
_CONFLICT_TRIES = 5


def _status(e: ClientError) -> int:
    return int(e.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))


def _code(e: ClientError) -> str:
    return str(e.response.get("Error", {}).get("Code", ""))


class S3Store:
    """A bucket prefix; thread-safe (one botocore client, whose connection pool holds
    ``max_connections``: the sink's ``worker-count``)."""

    def __init__(self, settings: S3Settings, max_connections: int = 16) -> None:
        self.settings = settings
        self._max_connections = max_connections
        self._client: Any = None
        self._lock = threading.Lock()

    @property
    def location(self) -> str:
        s = self.settings
        return f"s3://{s.bucket}/{s.prefix}" if s.prefix else f"s3://{s.bucket}"

    @property
    def client(self) -> Any:
        with self._lock:
            if self._client is None:
                self._client = self._make_client()
            return self._client

    def _make_client(self) -> Any:
        s = self.settings
        config = Config(
            s3={
                "addressing_style": "path" if s.force_path_style else "virtual",
                "use_accelerate_endpoint": s.use_accelerate_endpoint,
            },
            retries={"mode": "standard", "max_attempts": 5},
            max_pool_connections=self._max_connections,
            connect_timeout=10,
            read_timeout=60,
        )
        session = botocore.session.get_session()
        return session.create_client(
            "s3",
            region_name=s.region or None,
            endpoint_url=s.endpoint or None,
            aws_access_key_id=s.access_key or None,
            aws_secret_access_key=s.secret_access_key or None,
            aws_session_token=s.session_token or None,
            config=config,
        )

    def _key(self, relative: PurePosixPath | str) -> str:
        prefix = self.settings.prefix
        return f"{prefix}/{relative}" if prefix else str(relative)

    def _fail(self, what: str, key: str, e: Exception) -> StoreError:
        return StoreError(f"{self.location}: {what} {key}: {e}")

    def _put_args(self) -> dict[str, str]:
        s = self.settings
        args = {}
        if s.storage_class:
            args["StorageClass"] = s.storage_class
        if s.sse:
            args["ServerSideEncryption"] = s.sse
        if s.sse_kms_key_id:
            args["SSEKMSKeyId"] = s.sse_kms_key_id
        if s.acl:
            args["ACL"] = s.acl
        return args

    # -- the Store port ------------------------------------------------------------------------

    def open(self) -> None:
        """Check the bucket is there and that a conditional PUT of a taken key is refused."""
        probe = PurePosixPath(TMP_DIR, f"probe-{uuid.uuid4().hex}")
        try:
            self.client.head_bucket(Bucket=self.settings.bucket)
        except (BotoCoreError, ClientError) as e:
            raise self._fail("cannot reach bucket", self.settings.bucket, e) from e
        if not self.create(probe, b"probe"):
            raise StoreError(f"{self.location}: the probe {probe} exists already")
        try:
            if self.create(probe, b"again"):
                raise UnsafeStore(
                    f"{self.location}: the service overwrote an object despite If-None-Match: *;"
                    " the storage sink needs conditional writes to never replace a file"
                )
        finally:
            try:
                self.client.delete_object(Bucket=self.settings.bucket, Key=self._key(probe))
            except (BotoCoreError, ClientError):
                pass  # a leftover probe under .tmp/ is skipped by every reader

    def create(self, relative: PurePosixPath, data: bytes) -> bool:
        key = self._key(relative)
        for _ in range(_CONFLICT_TRIES):
            try:
                self.client.put_object(
                    Bucket=self.settings.bucket,
                    Key=key,
                    Body=data,
                    IfNoneMatch="*",
                    **self._put_args(),
                )
                return True
            except ClientError as e:
                if _status(e) == _TAKEN:
                    return False
                if _status(e) != _CONFLICT:
                    raise self._fail("cannot create", key, e) from e
            except BotoCoreError as e:
                raise self._fail("cannot create", key, e) from e
        raise StoreError(f"{self.location}: {key}: conditional writes kept conflicting")

    def replace(self, relative: PurePosixPath, data: bytes) -> None:
        key = self._key(relative)
        try:
            self.client.put_object(
                Bucket=self.settings.bucket, Key=key, Body=data, **self._put_args()
            )
        except (BotoCoreError, ClientError) as e:
            raise self._fail("cannot write", key, e) from e

    def read(self, relative: PurePosixPath) -> bytes | None:
        key = self._key(relative)
        try:
            answer = self.client.get_object(Bucket=self.settings.bucket, Key=key)
            return bytes(answer["Body"].read())
        except ClientError as e:
            if _code(e) in _MISSING:
                return None
            raise self._fail("cannot read", key, e) from e
        except BotoCoreError as e:
            raise self._fail("cannot read", key, e) from e

    def size(self, relative: PurePosixPath) -> int | None:
        key = self._key(relative)
        try:
            return int(
                self.client.head_object(Bucket=self.settings.bucket, Key=key)["ContentLength"]
            )
        except ClientError as e:
            if _code(e) in _MISSING:
                return None
            raise self._fail("cannot stat", key, e) from e
        except BotoCoreError as e:
            raise self._fail("cannot stat", key, e) from e

    def _list(self, prefix: str, delimiter: str) -> list[str]:
        keys: list[str] = []
        args = {"Bucket": self.settings.bucket, "Prefix": prefix}
        if delimiter:
            args["Delimiter"] = delimiter
        try:
            pages = self.client.get_paginator("list_objects_v2").paginate(**args)
            for page in pages:
                keys.extend(str(o["Key"]) for o in page.get("Contents", ()))
        except (BotoCoreError, ClientError) as e:
            raise self._fail("cannot list", prefix, e) from e
        return keys

    def list_names(self, relative: PurePosixPath) -> list[str]:
        prefix = self._key(relative).rstrip("/") + "/"
        return [k[len(prefix) :] for k in self._list(prefix, "/")]

    def walk(self) -> list[str]:
        prefix = f"{self.settings.prefix}/" if self.settings.prefix else ""
        tmp = f"{TMP_DIR}/"
        relative = (k[len(prefix) :] for k in self._list(prefix, ""))
        return [r for r in relative if r and not r.startswith(tmp)]
