"""mTLS: the principal of a connection is its client certificate's subject CN."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import pytest

from ingest.errors import ConfigError
from ingest.security import Listener, SecurityProtocol, SecuritySession
from ingest.security.tls import server_context
from tests.integration.security.certs import TestPki, make_pki


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> TestPki:
    return make_pki(tmp_path_factory.mktemp("pki"), client_cn="alice-app")


async def _principal(pki: TestPki, client_auth: str, with_cert: bool) -> str:
    listener = Listener("SSL", SecurityProtocol.SSL, "127.0.0.1", 0)
    seen: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    class _Probe(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            session = SecuritySession(listener)
            session.on_connected(transport)
            if not seen.done():
                seen.set_result(session.principal)

    ctx = server_context(str(pki.server_cert), str(pki.server_key), str(pki.ca), client_auth)  # type: ignore[arg-type]
    server = await asyncio.get_running_loop().create_server(_Probe, "127.0.0.1", 0, ssl=ctx)
    port = server.sockets[0].getsockname()[1]
    client = ssl.create_default_context(cafile=str(pki.ca))
    if with_cert:
        client.load_cert_chain(str(pki.client_cert), str(pki.client_key))
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client)
        try:
            return await asyncio.wait_for(seen, 10)
        finally:
            writer.close()
    finally:
        server.close()
        await server.wait_closed()


def test_a_verified_client_certificate_names_the_principal(pki: TestPki) -> None:
    assert asyncio.run(_principal(pki, "required", True)) == "User:alice-app"
    assert asyncio.run(_principal(pki, "requested", True)) == "User:alice-app"


def test_without_a_client_certificate_the_principal_is_anonymous(pki: TestPki) -> None:
    assert asyncio.run(_principal(pki, "requested", False)) == "User:ANONYMOUS"
    assert asyncio.run(_principal(pki, "none", True)) == "User:ANONYMOUS"


def test_tls_settings_that_cannot_work_fail_at_start_naming_the_key(
    pki: TestPki, tmp_path: Path
) -> None:
    for args, key in (
        ((None, None, None, "none"), "ssl_certfile"),
        ((str(tmp_path / "missing.pem"), None, None, "none"), "ssl_certfile"),
        ((str(pki.server_cert), str(pki.server_key), None, "required"), "ssl_cafile"),
    ):
        with pytest.raises(ConfigError) as info:
            server_context(*args)  # type: ignore[arg-type]
        assert info.value.key == key
