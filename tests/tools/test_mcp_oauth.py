"""OAuth 2.1 for MCPServerHTTP against a real MCP server behind the SDK's authorization server
(``_mcp_oauth_server.py``): dynamic client registration, the authorization code flow with PKCE through
the redirect callback, tokens kept per user in a token store (memory and file), and refresh."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from tests.tools._mcp_process import serve_http
from toolwire.tools.mcp import (
    FileTokenStore,
    MCPServerHTTP,
    MCPToolError,
    MemoryTokenStore,
    OAuthAuthorizationCode,
    TokenStore,
)

SERVER = Path(__file__).parent / "_mcp_oauth_server.py"


@pytest.fixture(scope="module")
def oauth_url() -> Iterator[str]:
    with serve_http(SERVER) as url:
        yield url


@pytest.fixture
def short_lived_url() -> Iterator[str]:
    with serve_http(SERVER, "1") as url:  # access tokens live one second
        yield url


class Browser:
    """The person's side of the redirect: follows the authorization URL (the test server approves at once)
    and returns where the authorization server sent the browser back to."""

    def __init__(self) -> None:
        self.visited: list[str] = []

    async def __call__(self, authorization_url: str) -> str:
        self.visited.append(authorization_url)
        async with httpx.AsyncClient() as client:
            answer = await client.get(authorization_url)
        assert answer.status_code == 302, answer.text
        return answer.headers["location"]


def sign_in(browser: Browser) -> OAuthAuthorizationCode:
    return OAuthAuthorizationCode(authorize=browser, scope="tools")


def data(output: Any) -> dict[str, Any]:
    return dict(output.get("result", output)) if isinstance(output, dict) else json.loads(output)


async def whoami(source: MCPServerHTTP) -> dict[str, Any]:
    try:
        return data(await source.call("whoami", {}))
    finally:
        await source.aclose()


async def test_authorization_code_with_pkce_and_registration(oauth_url: str) -> None:
    browser, store = Browser(), MemoryTokenStore()
    source = MCPServerHTTP(oauth_url, oauth=sign_in(browser), token_store=store, user="alice")
    me = await whoami(source)
    [visited] = browser.visited
    assert "code_challenge_method=S256" in visited and "code_challenge=" in visited
    # The configured scope is what is registered, asked for and granted (the SDK would otherwise replace
    # it with what the servers advertise: here nothing at all).
    assert parse_qs(urlsplit(visited).query)["scope"] == ["tools"]
    client = await store.get(oauth_url, "alice", "client")
    assert client is not None and client["client_id"] == me["client_id"]  # registered dynamically
    assert client["scope"] == "tools"
    tokens = await store.get(oauth_url, "alice", "tokens")
    assert tokens is not None and tokens["access_token"] and tokens["refresh_token"]
    assert tokens["scope"] == "tools"

    # a new connection for the same user (a restart) uses the stored tokens: nobody signs in again
    again = await whoami(MCPServerHTTP(oauth_url, oauth=sign_in(browser), token_store=store, user="alice"))
    assert again == me and len(browser.visited) == 1


async def test_tokens_are_kept_per_user(oauth_url: str) -> None:
    browser, store = Browser(), MemoryTokenStore()
    alice = MCPServerHTTP(oauth_url, oauth=sign_in(browser), token_store=store, user="alice")
    bob = alice.for_user("bob")
    assert (bob.user, bob.token_store, bob.oauth) == ("bob", store, alice.oauth)
    alice_me, bob_me = await whoami(alice), await whoami(bob)
    assert len(browser.visited) == 2  # each signs in
    assert alice_me["token"] != bob_me["token"]
    alice_tokens = await store.get(oauth_url, "alice", "tokens")
    bob_tokens = await store.get(oauth_url, "bob", "tokens")
    assert alice_tokens is not None and bob_tokens is not None
    assert alice_tokens["access_token"] != bob_tokens["access_token"]


async def test_an_expired_token_is_refreshed_after_a_restart(short_lived_url: str, tmp_path: Path) -> None:
    browser = Browser()
    path = tmp_path / "tokens.json"
    store: TokenStore = FileTokenStore(path)
    first = await whoami(MCPServerHTTP(short_lived_url, oauth=sign_in(browser), token_store=store))
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600  # secrets: the owner's only
    stored = await store.get(short_lived_url, "default", "tokens")
    assert stored is not None
    async with asyncio.timeout(10):  # wait for the state that matters: the stored token has expired
        while time.time() <= stored["expires_at"]:
            await asyncio.sleep(0.05)

    # another process: a new store object reading the same file, and a new connection
    restarted = MCPServerHTTP(short_lived_url, oauth=sign_in(browser), token_store=FileTokenStore(path))
    second = await whoami(restarted)
    assert len(browser.visited) == 1  # refreshed, not signed in again
    assert second["client_id"] == first["client_id"] and second["token"] != first["token"]
    probe = MCPServerHTTP(short_lived_url, oauth=sign_in(browser), token_store=FileTokenStore(path))
    try:
        stats = data(await probe.call("auth_stats", {}))
    finally:
        await probe.aclose()
    assert stats["registrations"] == 1 and stats["authorizations"] == 1 and stats["refreshes"] >= 1


async def test_without_oauth_the_server_refuses(oauth_url: str) -> None:
    source = MCPServerHTTP(oauth_url, connect_timeout=10)
    with pytest.raises(MCPToolError, match="cannot connect"):
        await source.list_tools()
    await source.aclose()


async def test_a_refused_authorization_is_a_clear_error(oauth_url: str) -> None:
    async def refuse(authorization_url: str) -> str:
        return "http://127.0.0.1:33418/callback?error=access_denied&state=x"

    source = MCPServerHTTP(oauth_url, oauth=OAuthAuthorizationCode(authorize=refuse), connect_timeout=10)
    with pytest.raises(MCPToolError, match="access_denied"):
        await source.list_tools()
    await source.aclose()
