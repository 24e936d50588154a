"""A stand-in provider on a loopback port: answers every request with a fixed error, records the headers."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


@dataclass
class RefusingProvider:
    base_url: str
    authorizations: list[str] = field(default_factory=list)


@contextmanager
def refusing_server() -> Iterator[RefusingProvider]:
    """An OpenAI-compatible server that refuses every request with 401 (bad credentials)."""
    provider = RefusingProvider(base_url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            provider.authorizations.append(self.headers.get("authorization") or "")
            body = json.dumps(
                {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}
            ).encode()
            self.send_response(401)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    provider.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield provider
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def refusing_provider() -> Iterator[RefusingProvider]:
    """An OpenAI-compatible server that refuses every request with 401 (bad credentials)."""
    with refusing_server() as provider:
        yield provider
