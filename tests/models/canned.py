"""A provider stand-in for adapter tests: an injected httpx transport answering every request with the same
body, keeping what was sent."""

from __future__ import annotations

import httpx


class CannedServer:
    def __init__(self, body: bytes, content_type: str = "text/event-stream") -> None:
        self.body, self.content_type = body, content_type
        self.requests: list[httpx.Request] = []

    def client(self) -> httpx.AsyncClient:
        def handler(request: httpx.Request) -> httpx.Response:
            self.requests.append(request)
            return httpx.Response(200, headers={"content-type": self.content_type}, content=self.body)

        return httpx.AsyncClient(transport=httpx.MockTransport(handler))

    def tokens(self) -> list[str]:
        """The ``authorization`` header of each request, in order."""
        return [r.headers["authorization"] for r in self.requests]
