"""The HTTP client an adapter makes for itself when none is injected."""

from __future__ import annotations

import ssl

import httpx

from toolwire.models._http import make_client


def _tls_context(client: httpx.AsyncClient) -> ssl.SSLContext:
    pool = client._transport._pool  # type: ignore[attr-defined]  # httpcore's pool holds the context
    context = pool._ssl_context
    assert isinstance(context, ssl.SSLContext)
    return context


async def test_adapters_own_clients_share_one_verifying_tls_context() -> None:
    # httpx reads the CA bundle again for every client (~16 ms on each adapter's first request); the
    # shared context must still verify certificates and host names like httpx's own default.
    (first, owned_first), (second, owned_second) = make_client(None), make_client(None)
    try:
        assert owned_first and owned_second
        context = _tls_context(first)
        assert _tls_context(second) is context
        assert context.verify_mode is ssl.CERT_REQUIRED
        assert context.check_hostname
        assert context.cert_store_stats()["x509_ca"] > 0  # the CA bundle is loaded
    finally:
        await first.aclose()
        await second.aclose()


async def test_an_injected_client_is_used_as_given() -> None:
    async with httpx.AsyncClient() as given:
        client, owned = make_client(given)
        assert client is given and not owned
