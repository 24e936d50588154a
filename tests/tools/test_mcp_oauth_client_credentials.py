"""The client credentials grant for MCPServerHTTP against a real MCP server behind a real authorization
server (authlib's ``ClientCredentialsGrant``, ``_mcp_client_credentials_server.py``): the token is fetched
once, stored per user and reused; a token the server refuses (revoked, expired) is replaced by a new grant and
the call runs once; a wrong secret is a typed error naming the server, also over the toolwire server; and the
authorization server sees the configured scope."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.server.conftest import live_server
from tests.tools._mcp_process import serve_http
from toolwire import Agent, TextPart
from toolwire.models.scripted import ScriptedModel
from toolwire.server import create_app
from toolwire.store import MemoryStore
from toolwire.tools.mcp import MCPServerHTTP, MCPToolError, MemoryTokenStore, OAuthClientCredentials

SERVER = Path(__file__).parent / "_mcp_client_credentials_server.py"


@pytest.fixture(scope="module")
def mcp_url() -> Iterator[str]:
    with serve_http(SERVER) as url:
        yield url


def issuer(mcp_url: str) -> str:
    return mcp_url.removesuffix("/mcp")


def credentials(
    mcp_url: str, client_id: str = "worker", client_secret: str = "worker-secret"
) -> OAuthClientCredentials:
    return OAuthClientCredentials(
        client_id=client_id, client_secret=client_secret, scope="tools", issuer=issuer(mcp_url)
    )


async def auth_stats(mcp_url: str) -> dict[str, Any]:
    """What the authorization server saw: token requests (with their scope), issued and revoked tokens,
    and how often each tool ran."""
    async with httpx.AsyncClient() as client:
        answer = await client.get(f"{issuer(mcp_url)}/stats")
    answer.raise_for_status()
    stats: dict[str, Any] = answer.json()
    return stats


async def whoami(source: MCPServerHTTP) -> dict[str, Any]:
    output = await source.call("whoami", {})
    return dict(output.get("result", output)) if isinstance(output, dict) else json.loads(output)


async def test_a_token_is_granted_stored_per_user_and_reused(mcp_url: str) -> None:
    store = MemoryTokenStore()
    before = await auth_stats(mcp_url)
    alice = MCPServerHTTP(mcp_url, oauth=credentials(mcp_url), token_store=store, user="alice")
    try:
        first, second = await whoami(alice), await whoami(alice)
    finally:
        await alice.aclose()
    assert first["client_id"] == "worker" and second == first
    granted = await store.get(mcp_url, "alice", "tokens")
    assert granted is not None and granted["access_token"] and "refresh_token" not in granted
    assert await store.get(mcp_url, "bob", "tokens") is None

    # a new connection for alice (a restart) sends the stored token: no token request at all
    restarted = MCPServerHTTP(mcp_url, oauth=credentials(mcp_url), token_store=store, user="alice")
    try:
        assert await whoami(restarted) == first
    finally:
        await restarted.aclose()
    after = await auth_stats(mcp_url)
    requests = after["token_requests"][len(before["token_requests"]) :]
    assert requests == [{"grant_type": "client_credentials", "scope": "tools"}]

    bob = alice.for_user("bob")
    try:
        bob_me = await whoami(bob)
    finally:
        await bob.aclose()
    bob_tokens = await store.get(mcp_url, "bob", "tokens")
    assert bob_tokens is not None and bob_tokens["access_token"] != granted["access_token"]
    assert bob_me["token"] != first["token"]


async def test_the_configured_scope_is_the_one_requested_and_granted(mcp_url: str) -> None:
    # the authorization server advertises "tools reports": the configured "tools" is what is asked for
    before = await auth_stats(mcp_url)
    source = MCPServerHTTP(mcp_url, oauth=credentials(mcp_url), token_store=MemoryTokenStore())
    try:
        me = await whoami(source)
    finally:
        await source.aclose()
    after = await auth_stats(mcp_url)
    [request] = after["token_requests"][len(before["token_requests"]) :]
    assert request["scope"] == "tools"
    assert me["scopes"] == ["tools"]


async def refused_then_replaced(mcp_url: str, source: MCPServerHTTP, refuse: Any) -> None:
    """Call once, have the server refuse the token (``refuse``), call again: one new grant, one call."""
    first = await whoami(source)
    await refuse()
    before = await auth_stats(mcp_url)
    second = await whoami(source)
    after = await auth_stats(mcp_url)
    assert second["client_id"] == first["client_id"] and second["token"] != first["token"]
    assert len(after["token_requests"]) - len(before["token_requests"]) == 1
    assert after["calls"]["whoami"] - before["calls"]["whoami"] == 1  # once, not again after the 401


async def test_a_revoked_token_is_replaced_by_a_new_grant(mcp_url: str) -> None:
    store = MemoryTokenStore()
    source = MCPServerHTTP(mcp_url, oauth=credentials(mcp_url), token_store=store)

    async def revoke() -> None:
        tokens = await store.get(mcp_url, "default", "tokens")
        assert tokens is not None
        async with httpx.AsyncClient() as client:  # RFC 7009, as an operator revoking a leaked token
            answer = await client.post(
                f"{issuer(mcp_url)}/revoke",
                data={"token": tokens["access_token"]},
                auth=("worker", "worker-secret"),
            )
        assert answer.status_code == 200, answer.text

    try:
        await refused_then_replaced(mcp_url, source, revoke)
    finally:
        await source.aclose()


async def test_an_expired_token_is_replaced_by_a_new_grant(mcp_url: str) -> None:
    store = MemoryTokenStore()
    brief = credentials(mcp_url, "brief", "brief-secret")  # this client's tokens live one second
    source = MCPServerHTTP(mcp_url, oauth=brief, token_store=store)

    async def expire() -> None:
        tokens = await store.get(mcp_url, "default", "tokens")
        assert tokens is not None
        async with asyncio.timeout(10):  # wait for the state that matters: the token has expired
            while time.time() <= tokens["expires_at"] + 0.1:
                await asyncio.sleep(0.05)

    try:
        await refused_then_replaced(mcp_url, source, expire)
    finally:
        await source.aclose()


async def test_a_wrong_secret_is_a_typed_error_naming_the_server(mcp_url: str) -> None:
    wrong = credentials(mcp_url, client_secret="not-the-secret")
    source = MCPServerHTTP(mcp_url, oauth=wrong, connect_timeout=20)
    try:
        async with asyncio.timeout(30):  # an error, not a hang
            with pytest.raises(MCPToolError) as refused:
                await source.list_tools()
    finally:
        await source.aclose()
    message = str(refused.value)
    assert mcp_url in message and "invalid_client" in message


async def test_a_wrong_secret_over_the_toolwire_server_is_a_502_naming_the_server(mcp_url: str) -> None:
    wrong = credentials(mcp_url, client_secret="not-the-secret")
    source = MCPServerHTTP(mcp_url, oauth=wrong, connect_timeout=20)
    app = create_app(Agent(ScriptedModel([[TextPart(text="unused")]]), tools=[source]), store=MemoryStore())
    try:
        async with live_server(app) as server, server.client() as client:
            for _ in range(2):  # and again: the failed start left the session free, not busy
                posted = await client.post("/api/sessions/s1/messages", json={"text": "who am I?"})
                assert posted.status_code == 502, posted.text
                error = posted.json()["error"]
                assert error["type"] == "tool_source_failed"
                assert mcp_url in error["message"] and "invalid_client" in error["message"]
            user = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "who am I?"}]}
            chat = await client.post("/api/chat", json={"id": "chat-1", "messages": [user]})
            assert chat.status_code == 502, chat.text  # the AI SDK door too
            assert chat.json()["error"]["type"] == "tool_source_failed"
    finally:
        await source.aclose()
