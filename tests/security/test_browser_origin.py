"""What a real browser (headless Chromium) on another origin can do to a development server: nothing.

A development server (no tokens) trusts every loopback peer, and the developer's own browser is one: a
page they visit must not be able to start runs (a ``no-cors`` ``text/plain`` POST needs no preflight),
open the WebSocket, or read anything — and neither may a page that reaches the server under its own
host name through DNS rebinding. An origin listed with ``--allow-origin`` is the positive control: the
same page, served from there, reads the session list and starts a run.

Everything the page did is checked from outside too: through the API as the legitimate loopback client,
in the store, and in what the browser's network layer saw.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from playwright.async_api import Browser, Page, async_playwright

from toolwire import open_store

from ._pages import PAGE, page_server
from .conftest import Served, serve

pytestmark = pytest.mark.timeout(120)

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-extensions",
    "--no-first-run",
    # rebind.test is 127.0.0.1 (the DNS rebinding case); no other name resolves: nothing leaves loopback
    "--host-resolver-rules=MAP rebind.test 127.0.0.1, MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
]


@asynccontextmanager
async def _chromium(*extra: str) -> AsyncIterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail("scripts/setup_chromium.sh installs Debian's chromium")
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=CHROMIUM, args=[*ARGS, *extra], headless=True
        )
        try:
            yield browser
        finally:
            await browser.close()


async def _visit(browser: Browser, url: str, server: Served) -> tuple[dict[str, Any], list[str]]:
    """Open the page; return what its script saw and what the network layer saw of the toolwire server."""
    page: Page = await browser.new_page()
    seen: list[str] = []
    port = f":{server.port}"

    def response(r: Any) -> None:
        if port in r.url:
            seen.append(f"{r.request.method} {r.url.split(port, 1)[1]} -> {r.status}")

    def failed(r: Any) -> None:
        if port in r.url:
            seen.append(f"{r.method} {r.url.split(port, 1)[1]} failed: {r.failure}")

    page.on("response", response)
    page.on("requestfailed", failed)
    page.on("websocket", lambda ws: seen.append(f"websocket {ws.url.split(port, 1)[1]}"))
    try:
        await page.goto(url, timeout=15_000)
        await page.wait_for_function("window.__results !== undefined", timeout=20_000)
        results: dict[str, Any] = await page.evaluate("window.__results")
    finally:
        await page.close()
    return results, seen


async def _stored_sessions(server: Served) -> list[str]:
    store = await open_store(server.store_url)
    try:
        return sorted(s.id for s in await store.list_sessions(limit=1000))
    finally:
        await store.close()


async def _listed_sessions(server: Served) -> list[str]:
    """The session list as the legitimate loopback client (no Origin header) sees it."""
    async with server.client() as client:
        response = await client.get("/api/sessions")
    assert response.status_code == 200, response.text
    return sorted(s["session_id"] for s in response.json()["sessions"])


def _query(server: Served, tw: str | None = None, **attempts: str) -> str:
    params = {"tw": server.url if tw is None else tw, **attempts}
    return urlencode(params)


async def test_a_page_on_another_origin_can_neither_run_nor_read(tmp_path: Path) -> None:
    with page_server() as evil_port:
        async with serve(tmp_path, tokens=None) as server, _chromium() as browser:
            query = _query(
                server,
                plain="victim",
                json="victim-json",
                ws=server.ws_url("/api/sessions/evil/ws"),
                read="1",
            )
            results, network = await _visit(browser, f"http://127.0.0.1:{evil_port}/?{query}", server)
            await asyncio.sleep(0.5)  # a run the page might have started would be stored by now
            listed = await _listed_sessions(server)
            stored = await _stored_sessions(server)
            async with server.client() as client:
                victim = await client.get("/api/sessions/victim/messages")
            log = server.log_text()
    print(f"\nthe page saw: {json.dumps(results)}\nthe network saw: {network}")

    # no run was started and no session was created, by any of the attempts
    assert listed == [] and stored == [], (listed, stored)
    assert victim.status_code == 404
    assert "secret leaked" not in log
    # the simple POST did reach the server (the browser sends it) and was refused before any work
    assert results["plain"] == {"type": "opaque", "status": 0}
    assert "POST /api/sessions/victim/messages -> 403" in network, network
    # the preflighted JSON POST and the read fail in the page: no CORS for this origin
    assert set(results["json"]) == {"error"}, results["json"]
    assert set(results["read"]) == {"error"}, results["read"]
    assert "secret" not in json.dumps(results["read"])
    # the WebSocket never opened: its handshake was refused (error, then close 1006)
    seen = results["ws"]["seen"]
    assert "open" not in seen and not any(s.startswith("message") for s in seen), seen
    assert seen[:2] == ["error", "close 1006"], seen


async def test_dns_rebinding_a_foreign_host_name_is_not_served(tmp_path: Path) -> None:
    """After rebinding, the attacker's page *is* same-origin with the server, under its own host name."""
    # Chromium's own Local Network Access checks would stop this page (its first load came from a
    # "public" address): turned off, as in browsers that have no such checks.
    lna = "--disable-features=LocalNetworkAccessChecks,BlockInsecurePrivateNetworkRequests"
    async with serve(tmp_path, tokens=None) as server, _chromium(lna) as browser:
        rebound = f"http://rebind.test:{server.port}"
        page_url = f"{rebound}/evil.html"
        # The page's first load came from the attacker's address (served here by the test), later
        # requests to the same name reach 127.0.0.1 (the resolver rule): the page is same-origin.
        context = await browser.new_context()
        await context.route(
            lambda url: url.startswith(page_url),
            lambda route: route.fulfill(status=200, content_type="text/html", body=PAGE),
        )
        page = await context.new_page()
        query = _query(
            server,
            tw="",
            json="rebound-json",
            ws=f"ws://rebind.test:{server.port}/api/sessions/rebound/ws",
            read="1",
        )
        try:
            await page.goto(f"{page_url}?{query}", timeout=15_000)
            await page.wait_for_function("window.__results !== undefined", timeout=20_000)
            results: dict[str, Any] = await page.evaluate("window.__results")
        finally:
            await context.close()
        await asyncio.sleep(0.5)
        listed = await _listed_sessions(server)
        stored = await _stored_sessions(server)
    print(f"\nthe rebound page saw: {json.dumps(results)}")
    # same-origin now, so the page reads what it gets: a refusal, never the data
    assert results["read"]["status"] == 403, results["read"]
    assert json.loads(results["read"]["body"])["error"]["type"] == "forbidden"
    assert results["json"]["status"] == 403, results["json"]
    seen = results["ws"]["seen"]
    assert "open" not in seen, seen
    assert listed == [] and stored == [], (listed, stored)


async def test_an_allowed_origin_reads_and_runs_the_same_page(tmp_path: Path) -> None:
    """The positive control: the same page from an ``--allow-origin`` origin gets CORS and is served."""
    with page_server() as friendly_port:
        origin = f"http://127.0.0.1:{friendly_port}"
        async with (
            serve(tmp_path, tokens=None, args=("--allow-origin", origin)) as server,
            _chromium() as browser,
        ):
            async with server.client() as client:  # something to read
                created = await client.post("/api/sessions", json={"session_id": "mine"})
                assert created.status_code == 201
            query = _query(
                server,
                plain="friend-plain",
                json="friend-json",
                ws=server.ws_url("/api/sessions/friend-ws/ws"),
                read="1",
            )
            results, network = await _visit(browser, f"{origin}/?{query}", server)
            await asyncio.sleep(0.5)
            stored = await _stored_sessions(server)
    print(f"\nthe allowed page saw: {json.dumps(results)}\nthe network saw: {network}")

    assert results["read"]["status"] == 200, results["read"]
    assert [s["session_id"] for s in json.loads(results["read"]["body"])["sessions"]][-1:] == ["mine"]
    assert results["json"]["status"] == 202, results["json"]
    seen = results["ws"]["seen"]
    assert seen[0] == "open" and any('"accepted"' in s for s in seen), seen
    # a text/plain body is still not JSON, whoever sends it: the POST reached the app and got 415
    assert "POST /api/sessions/friend-plain/messages -> 415" in network, network
    assert stored == ["friend-json", "friend-ws", "mine"], stored
