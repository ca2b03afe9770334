"""The one host:port parser: brackets for IPv6, a missing port, a bad port, endpoints."""

from __future__ import annotations

import pytest

from tributary.errors import TributaryError
from tributary.net import AddressError, join_host_port, split_endpoint, split_host_port


@pytest.mark.parametrize(
    ("addr", "want"),
    [
        ("127.0.0.1:8250", ("127.0.0.1", 8250)),
        ("pump-0.pump:8250", ("pump-0.pump", 8250)),
        ("[::1]:8250", ("::1", 8250)),
        ("[fd00::5]:0", ("fd00::5", 0)),
        (":8250", ("", 8250)),
        ("h:65535", ("h", 65535)),
    ],
)
def test_split(addr: str, want: tuple[str, int]) -> None:
    assert split_host_port(addr) == want


@pytest.mark.parametrize(
    ("addr", "says"),
    [
        ("8250", "no port"),
        ("host", "no port"),
        ("", "no port"),
        ("[::1]", "no port"),
        ("host:", "bad port ''"),
        ("host:x", "bad port 'x'"),
        ("host:-1", "bad port '-1'"),
        ("host:\u00b2", "bad port"),
        ("h:70000", "0..65535"),
        ("::1:8250", "brackets"),
        ("[::1:8250", "missing ']'"),
        ("[::1]8250", "':port' after ']'"),
    ],
)
def test_bad_addresses_say_what_is_wrong(addr: str, says: str) -> None:
    with pytest.raises(AddressError) as info:
        split_host_port(addr)
    assert says in str(info.value) and repr(addr) in str(info.value)
    assert isinstance(info.value, ValueError) and isinstance(info.value, TributaryError)
    assert not info.value.retriable


def test_default_port_fills_only_a_missing_port() -> None:
    assert split_host_port("etcd", default_port=2379) == ("etcd", 2379)
    assert split_host_port("[::1]", default_port=2379) == ("::1", 2379)
    assert split_host_port("etcd:1234", default_port=2379) == ("etcd", 1234)
    with pytest.raises(AddressError):
        split_host_port("etcd:", default_port=2379)


@pytest.mark.parametrize(("host", "port"), [("10.0.0.5", 8250), ("fd00::5", 8251), ("", 1)])
def test_join_is_the_inverse_of_split(host: str, port: int) -> None:
    assert split_host_port(join_host_port(host, port)) == (host, port)
    assert join_host_port("fd00::5", 8251) == "[fd00::5]:8251"


def test_endpoints() -> None:
    http = ("http",)
    assert split_endpoint("http://127.0.0.1:2379", schemes=http) == ("127.0.0.1", 2379)
    assert split_endpoint("HTTP://[::1]:2379/", schemes=http) == ("::1", 2379)
    assert split_endpoint("etcd", schemes=http, default_port=2379) == ("etcd", 2379)
    assert split_endpoint("grpc://pump:8250") == ("pump", 8250)  # any scheme
    for bad in ("https://a:2379", "http://", "http://a:1/path", "http://:2379", "http://a:x"):
        with pytest.raises(AddressError):
            split_endpoint(bad, schemes=http, default_port=2379)
