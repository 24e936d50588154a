"""What another origin can make a development server do (no tokens: every loopback peer is the
developer), over real sockets to ``toolwire serve``; the page's security headers."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import websockets
import websockets.exceptions

from toolwire import open_store

from .conftest import serve

pytestmark = pytest.mark.timeout(120)

EVIL = "http://evil.example"
ALLOWED = "http://app.example:3000"


async def _no_sessions(store_url: str) -> list[str]:
    store = await open_store(store_url)
    try:
        return [s.id for s in await store.list_sessions()]
    finally:
        await store.close()


async def test_foreign_origins_cannot_drive_a_development_server(tmp_path: Any) -> None:
    async with serve(tmp_path, tokens=None) as server:
        async with server.client() as client:
            # a cross-origin "simple" POST (no preflight): text/plain, as a form or fetch(no-cors) sends it
            for content_type in ("text/plain", "application/json"):
                response = await client.post(
                    "/api/sessions/victim/messages",
                    content=json.dumps({"text": "run the tools"}),
                    headers={"origin": EVIL, "content-type": content_type},
                )
                assert response.status_code == 403, response.text
                assert "access-control-allow-origin" not in response.headers
            chat = {"id": "victim", "messages": [{"role": "user", "parts": [{"type": "text", "text": "x"}]}]}
            assert (await client.post("/api/chat", json=chat, headers={"origin": EVIL})).status_code == 403
            # reads carrying a foreign origin are refused too (and would get no CORS headers anyway)
            listed = await client.get("/api/sessions", headers={"origin": EVIL})
            assert listed.status_code == 403 and "access-control-allow-origin" not in listed.headers
            assert (await client.get("/api/sessions", headers={"origin": "null"})).status_code == 403
            # a script/img tag sends no Origin, but the browser marks it cross-site
            tag = await client.get("/api/sessions", headers={"sec-fetch-site": "cross-site"})
            assert tag.status_code == 403
            # DNS rebinding: the browser talks to 127.0.0.1 under the attacker's host name
            rebound = await client.get("/api/sessions", headers={"host": f"evil.example:{server.port}"})
            assert rebound.status_code == 403
            # text/plain without any Origin (curl, or a browser that sends none) is not JSON: 415
            plain = await client.post(
                "/api/sessions/victim/messages",
                content=json.dumps({"text": "x"}),
                headers={"content-type": "text/plain"},
            )
            assert plain.status_code == 415
        for origin in (EVIL, "null"):
            with pytest.raises(websockets.exceptions.InvalidStatus) as refused:
                async with websockets.connect(server.ws_url("/api/sessions/evil/ws"), origin=origin):  # type: ignore[arg-type]
                    pass
            assert refused.value.response.status_code == 403
        assert await _no_sessions(server.store_url) == []
        # the server's own origin (and a local tool with no Origin at all) still works
        async with server.client() as client:
            own = await client.post(
                "/api/sessions/mine/messages", json={"text": "hello"}, headers={"origin": server.url}
            )
            assert own.status_code == 202
            localhost = await client.get(
                "/api/sessions",
                headers={"host": f"localhost:{server.port}", "origin": f"http://localhost:{server.port}"},
            )
            assert localhost.status_code == 200
        async with websockets.connect(server.ws_url("/api/sessions/mine/ws"), origin=server.url) as ws:  # type: ignore[arg-type]
            await ws.send(json.dumps({"type": "cancel"}))


async def test_cors_only_for_the_configured_origins(tmp_path: Any) -> None:
    async with serve(tmp_path, tokens=None, args=("--allow-origin", ALLOWED)) as server:
        async with server.client() as client:
            preflight = await client.options(
                "/api/sessions",
                headers={
                    "origin": ALLOWED,
                    "access-control-request-method": "POST",
                    "access-control-request-headers": "content-type",
                },
            )
            assert preflight.status_code == 200
            assert preflight.headers["access-control-allow-origin"] == ALLOWED
            listed = await client.get("/api/sessions", headers={"origin": ALLOWED})
            assert listed.status_code == 200 and listed.headers["access-control-allow-origin"] == ALLOWED
            other = await client.options(
                "/api/sessions", headers={"origin": EVIL, "access-control-request-method": "POST"}
            )
            assert other.status_code == 403 and "access-control-allow-origin" not in other.headers
        async with websockets.connect(server.ws_url("/api/sessions/w/ws"), origin=ALLOWED) as ws:  # type: ignore[arg-type]
            await ws.send(json.dumps({"type": "cancel"}))


async def test_the_page_cannot_be_framed_sniffed_or_made_to_run_foreign_script(tmp_path: Any) -> None:
    async with serve(tmp_path) as server, httpx.AsyncClient(base_url=server.url) as client:
        page = await client.get("/")
        assert page.status_code == 200
        csp = page.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in csp and "script-src 'self'" in csp and "unsafe-inline" not in csp
        for response in (page, await client.get("/static/app.js"), await client.get("/api/sessions")):
            assert response.headers["x-content-type-options"] == "nosniff"
            assert response.headers["x-frame-options"] == "DENY"
