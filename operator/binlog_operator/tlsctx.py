"""The operator's TLS client context for a BinlogCluster's pumps and drainers, from the
cluster's ``spec.tls.secretName`` Secret (read through the API, never mounted).

The Secret holds ``ca.crt``, ``tls.crt`` and ``tls.key`` (the files the pods mount at
``configs.TLS_DIR``). The pumps serve their HTTP API over mutual TLS with those files, so the
operator verifies a pump's certificate against ``ca.crt`` and presents ``tls.crt``/``tls.key``
as its client certificate. Like the pumps' and drainers' own clients it checks the chain, not
the host name (a pod is reached by a DNS name its certificate need not list). Invariants: the
key material touches the disk only in a private directory (mode 0700) that is removed before
``context_from_secret`` returns (``ssl`` loads a certificate chain only from files); every
unusable Secret is a ``ScaleDownError`` naming what is wrong.
"""

from __future__ import annotations

import base64
import binascii
import os
import ssl
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from binlog_operator.kube import KubeClient, KubeError
from binlog_operator.scaledown import ScaleDownError
from tributary.telemetry.tls import ALPN_HTTP

KEYS = ("ca.crt", "tls.crt", "tls.key")


def context_from_secret(secret: Mapping[str, Any]) -> ssl.SSLContext:
    """An HTTPS client context from a Secret object's base64 ``data``."""
    name = secret.get("metadata", {}).get("name", "?")
    data = secret.get("data") or {}
    missing = [k for k in KEYS if not data.get(k)]
    if missing:
        raise ScaleDownError(f"TLS secret {name} lacks {', '.join(missing)}")
    try:
        ca, cert, key = (base64.b64decode(data[k], validate=True) for k in KEYS)
    except (binascii.Error, ValueError) as e:
        raise ScaleDownError(f"TLS secret {name}: data is not base64: {e}") from e
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = False
    ctx.set_alpn_protocols(list(ALPN_HTTP))
    try:
        ctx.load_verify_locations(cadata=ca.decode())
        with tempfile.TemporaryDirectory(prefix="binlog-operator-tls-") as tmp:
            os.chmod(tmp, 0o700)
            cert_path, key_path = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
            _write_private(cert_path, cert)
            _write_private(key_path, key)
            ctx.load_cert_chain(cert_path, key_path)
    except (ssl.SSLError, UnicodeDecodeError, OSError) as e:
        raise ScaleDownError(f"TLS secret {name}: unusable certificate or key: {e}") from e
    return ctx


def _write_private(path: Path, content: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(content)


async def context_for(kube: KubeClient, namespace: str, secret: str) -> ssl.SSLContext:
    """Read the Secret and build its context; ScaleDownError if it is missing or unusable."""
    try:
        found = await kube.get("v1", "Secret", namespace, secret)
    except KubeError as e:
        raise ScaleDownError(f"cannot read TLS secret {namespace}/{secret}: {e}") from e
    if found is None:
        raise ScaleDownError(f"TLS secret {namespace}/{secret} does not exist")
    return context_from_secret(found)
