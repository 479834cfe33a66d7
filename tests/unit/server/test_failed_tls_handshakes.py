"""A connection whose TLS handshake fails (a port scanner, a PLAINTEXT client on
an SSL listener) leaves nothing behind: the broker tracks only connections that
were made, so such peers neither grow its memory nor hold up its stop."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from ingest.broker import Broker
from ingest.config import BrokerConfig
from ingest.metadata import MemoryMetadataStore
from ingest.s3stream import MemoryStreamEngine
from tests.integration.security.certs import make_pki


async def test_failed_tls_handshakes_are_not_kept_and_do_not_delay_the_stop(
    tmp_path: Path,
) -> None:
    pki = make_pki(tmp_path / "pki")
    config = BrokerConfig.model_validate(
        {
            "listeners": ["SSL://127.0.0.1:0"],
            "ssl_certfile": str(pki.server_cert),
            "ssl_keyfile": str(pki.server_key),
            "shutdown_drain_timeout_ms": 10_000,
        }
    )
    broker = Broker(config, MemoryMetadataStore(), MemoryStreamEngine())
    await broker.start()
    stopped = False
    try:
        port = broker.bound_ports["SSL"]
        for _ in range(5):  # a Kafka request where a TLS ClientHello belongs
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"\x00\x00\x00\x0a\x00\x12\x00\x03\x00\x00\x00\x01\x00\x00")
            await writer.drain()
            assert await asyncio.wait_for(reader.read(), 5) == b""  # the broker hung up
            writer.close()
        await asyncio.sleep(0.2)
        assert len(broker._connections) == 0
        started = time.monotonic()
        await broker.stop()
        stopped = True
        assert time.monotonic() - started < 5  # not the 10 s drain for ghosts
    finally:
        if not stopped:
            await broker.stop()
