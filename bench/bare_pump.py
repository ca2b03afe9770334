"""A bare grpclib server for ``binlog.Pump/WriteBinlog``: the ceiling of one grpclib process.

It answers every WriteBinlog with an empty ``WriteBinlogResp`` (zero bytes, a valid proto3
message) and stores nothing; requests are not even decoded (a codec that passes bytes through),
so what it costs per request is grpclib and h2 alone. ``bench_pump_unary`` registers it in etcd
as an online pump and drives it with TiDB's pump client, as it drives the real pump.

Run: ``python -m bench.bare_pump --addr 127.0.0.1:PORT``; it prints ``ready`` once it listens.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
from typing import Any

import uvloop
from grpclib.const import Cardinality, Handler
from grpclib.encoding.base import CodecBase
from grpclib.server import Server, Stream

from tributary.net import split_host_port

WRITE = "/binlog.Pump/WriteBinlog"


class RawCodec(CodecBase):
    """Messages are the marshalled bytes themselves."""

    __content_subtype__ = "proto"

    def encode(self, message: Any, message_type: Any) -> bytes:
        return bytes(message)

    def decode(self, data: bytes, message_type: Any) -> Any:
        return data


class BarePump:
    def __init__(self) -> None:
        self.answered = 0

    async def write_binlog(self, stream: Stream[bytes, bytes]) -> None:
        await stream.recv_message()
        await stream.send_message(b"")
        self.answered += 1

    def __mapping__(self) -> dict[str, Handler]:
        return {WRITE: Handler(self.write_binlog, Cardinality.UNARY_UNARY, bytes, bytes)}


async def serve(addr: str) -> None:
    host, port = split_host_port(addr)
    server = Server([BarePump()], codec=RawCodec())
    await server.start(host, port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print("ready", flush=True)
    await stop.wait()
    server.close()
    await server.wait_closed()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--addr", required=True, help="host:port to listen on")
    uvloop.run(serve(ap.parse_args().addr))


if __name__ == "__main__":
    main()
