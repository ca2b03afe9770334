import aetcd

from tests.support.etcd import EtcdProcess


async def test_real_etcd_round_trip(etcd: EtcdProcess) -> None:
    async with aetcd.Client(host=etcd.host, port=etcd.port) as client:
        await client.put(b"/k", b"v")
        got = await client.get(b"/k")
        assert got is not None and got.value == b"v"
