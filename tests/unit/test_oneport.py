"""How the shared port tells gRPC from HTTP/1.1 by a connection's first bytes or ALPN."""

from __future__ import annotations

import pytest

from tributary.telemetry.oneport import PREFACE, Kind, by_alpn, classify


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (PREFACE, Kind.GRPC),
        (PREFACE + b"\x00\x00\x12\x04", Kind.GRPC),
        (PREFACE[:8], None),  # could still be the preface
        (b"P", None),
        (b"GET /status HTTP/1.1\r\n", Kind.HTTP),
        (b"PUT ", Kind.HTTP),
        (b"POST", None),  # a method so far, no space yet
        (b"PRIX", None),
        (b"PRI /x HTTP/1.1", Kind.HTTP),  # not the preface: an HTTP/1 request line
        (b"\x16\x03\x01\x02\x00", Kind.GARBAGE),  # a TLS ClientHello on a plain port
        (b"get /", Kind.GARBAGE),
        (b"GET\r\n", Kind.GARBAGE),
        (b"A" * 21, Kind.GARBAGE),
    ],
)
def test_classify(data: bytes, kind: Kind | None) -> None:
    assert classify(data) is kind


def test_alpn_decides_first() -> None:
    assert by_alpn("h2") is Kind.GRPC
    assert by_alpn("http/1.1") is Kind.HTTP
    assert by_alpn(None) is None
