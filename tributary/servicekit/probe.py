"""A Kubernetes exec probe for services whose HTTP API requires client certificates.

With TLS on, a pump's or drainer's HTTP API refuses clients without a certificate from the
cluster's CA, and the kubelet's ``httpGet`` probes present none. The pod then probes itself:
``python -m servicekit.probe https://127.0.0.1:8251/ready --tls-dir /etc/binlog/tls`` exits 0
when the route answers 200 and 1 otherwise (refused, timed out, TLS failure, any other status),
printing why. Standard library only, so a probe costs an interpreter start and nothing more.
The server's certificate is checked against the CA but not its name (the pod dials 127.0.0.1),
as the services' own clients do.
"""

from __future__ import annotations

import argparse
import http.client
import ssl
import sys
from pathlib import Path
from urllib.parse import urlsplit


def probe(url: str, tls_dir: Path | None, timeout: float) -> tuple[bool, str]:
    """``(healthy, what happened)`` for one GET of ``url``."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port
    conn: http.client.HTTPConnection
    if parts.scheme == "https":
        ctx = ssl.create_default_context(cafile=str(tls_dir / "ca.crt") if tls_dir else None)
        ctx.check_hostname = False
        if tls_dir is not None:
            ctx.load_cert_chain(tls_dir / "tls.crt", tls_dir / "tls.key")
        conn = http.client.HTTPSConnection(host, port, timeout=timeout, context=ctx)
    else:
        conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("GET", parts.path or "/")
        resp = conn.getresponse()
        body = resp.read(500).decode("utf-8", "replace")
    except (OSError, ssl.SSLError, http.client.HTTPException) as e:
        return False, f"{url}: {type(e).__name__}: {e}"
    finally:
        conn.close()
    return resp.status == 200, f"{url}: {resp.status} {body}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m servicekit.probe", description=__doc__)
    parser.add_argument("url", help="e.g. https://127.0.0.1:8251/ready")
    parser.add_argument("--tls-dir", type=Path, help="directory with ca.crt, tls.crt, tls.key")
    parser.add_argument("--timeout", type=float, default=3.0, help="seconds (default 3)")
    args = parser.parse_args(argv)
    try:
        healthy, said = probe(args.url, args.tls_dir, args.timeout)
    except (OSError, ssl.SSLError) as e:  # unreadable certificate files
        healthy, said = False, f"TLS material in {args.tls_dir}: {e}"
    print(said)
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main())
