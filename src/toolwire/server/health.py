"""``GET /api/health``: whether this replica can serve (its store answers), for load balancers and
orchestrators. No token needed and nothing about sessions or users is shown."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from toolwire.server._state import ToolwireServer


class Health:
    def __init__(self, server: ToolwireServer) -> None:
        self.server = server

    async def get(self, request: Request) -> Response:
        """200 with this replica's state when its store answers, 503 when it does not (or it drains)."""
        server = self.server
        body: dict[str, object] = {
            "replica": server.replica,
            "shared_events": server.hub.shared,
            "runs": server.runs.count(),
            "taken_over": len(server.watcher.taken) if server.watcher is not None else 0,
            "draining": server.draining,
        }
        try:
            store = await server.store()
            await store.get_session("__health__")
        except Exception as exc:  # the store is down: route clients elsewhere
            body["status"] = "unavailable"
            body["error"] = type(exc).__name__
            return JSONResponse(body, status_code=503)
        body["status"] = "draining" if server.draining else "ok"
        return JSONResponse(body, status_code=503 if server.draining else 200)
