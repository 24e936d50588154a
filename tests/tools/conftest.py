"""The test MCP server (``_mcp_server.py``, the mcp SDK's own server) as the MCP client tests reach it: over
streamable HTTP (one process per test module) and, per test, a factory of clients of each transport."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.tools._mcp_process import serve_http
from toolwire.tools.mcp import MCPServerHTTP, MCPServerStdio

SERVER = Path(__file__).parent / "_mcp_server.py"


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    with serve_http(SERVER) as url:
        yield url


@pytest.fixture(params=["stdio", "http"])
async def servers(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    """A factory of clients of the test server over this transport (``**kwargs`` for the client), closed
    after the test."""
    made: list[MCPServerStdio | MCPServerHTTP] = []

    def make(**kwargs: Any) -> MCPServerStdio | MCPServerHTTP:
        source: MCPServerStdio | MCPServerHTTP
        if request.param == "stdio":
            source = MCPServerStdio(sys.executable, [str(SERVER), "stdio"], timeout=10, **kwargs)
        else:
            source = MCPServerHTTP(request.getfixturevalue("http_url"), timeout=10, **kwargs)
        made.append(source)
        return source

    yield make
    for source in made:
        await source.aclose()
