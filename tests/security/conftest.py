"""A real ``toolwire serve`` process on loopback, for the attacks in this package.

The agent is built by ``tests/security/agents.py`` (scripted models, real tools, a sub-agent), the store
is a SQLite file or, for the ownership attacks, a fresh PostgreSQL schema. Each test talks to it over
real sockets, as an attacker or a careless client would; nothing is mocked but the model.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

ROOT = Path(__file__).parents[2]
HERE = Path(__file__).parent
POSTGRES_ENV = "TOOLWIRE_TEST_POSTGRES_URL"
TOKENS = {"tok-alice": "alice", "tok-mallory": "mallory"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Served:
    """A running ``toolwire serve``: its URL, process and the log it wrote."""

    url: str
    port: int
    process: subprocess.Popen[bytes]
    log: Path
    store_url: str

    def client(self, token: str | None = None, **kwargs: Any) -> httpx.AsyncClient:
        headers = {"authorization": f"Bearer {token}"} if token else {}
        headers.update(kwargs.pop("headers", {}))
        return httpx.AsyncClient(base_url=self.url, headers=headers, timeout=30, **kwargs)

    def ws_url(self, path: str, token: str | None = None) -> str:
        query = f"?token={token}" if token else ""
        return f"ws://127.0.0.1:{self.port}{path}{query}"

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


async def wait_listening(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while True:
        assert process.poll() is None, log.read_text(errors="replace")[-3000:]
        assert time.monotonic() < deadline, "the server did not start"
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            await asyncio.sleep(0.05)


@asynccontextmanager
async def serve(
    tmp_path: Path,
    *,
    store_url: str | None = None,
    tokens: dict[str, str] | None = TOKENS,
    args: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> AsyncIterator[Served]:
    """Start ``toolwire serve tests.security.agents:build`` and stop it (SIGTERM) afterwards."""
    port = free_port()
    log = tmp_path / f"serve-{port}.log"
    store_url = store_url or f"sqlite+aiosqlite:///{tmp_path / 'server.db'}"
    command = [sys.executable, "-m", "toolwire", "serve", "tests.security.agents:build"]
    command += ["--port", str(port), "--store", store_url, *args]
    child_env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{ROOT / 'src'}", **(env or {}))
    child_env.pop("TOOLWIRE_TOKENS", None)
    if tokens:
        child_env["TOOLWIRE_TOKENS"] = ",".join(f"{t}:{u}" for t, u in tokens.items())
    with log.open("wb") as sink:
        process = subprocess.Popen(
            command, env=child_env, stdout=sink, stderr=subprocess.STDOUT, cwd=tmp_path
        )
    try:
        await wait_listening(port, process, log)
        yield Served(
            url=f"http://127.0.0.1:{port}",
            port=port,
            process=process,
            log=log,
            store_url=store_url,
        )
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)


async def idle(client: httpx.AsyncClient, session_id: str) -> dict[str, Any]:
    """The session's history once no run holds it."""
    for _ in range(500):
        history = (await client.get(f"/api/sessions/{session_id}/messages")).json()
        if not history.get("running"):
            return dict(history)
        await asyncio.sleep(0.02)
    raise AssertionError("the run did not finish")


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store URL for the server: a SQLite file, or a new PostgreSQL schema (``?schema=``)."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'server.db'}"
        return
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        if os.environ.get("CI"):
            pytest.fail(f"{POSTGRES_ENV} is not set in CI")
        pytest.skip(f"{POSTGRES_ENV} not set (scripts/postgres.sh starts a local server)")
    schema = f"sec_{uuid.uuid4().hex[:12]}"
    asyncio.run(_schema(url, f'CREATE SCHEMA "{schema}"'))
    try:
        yield f"{url}?schema={schema}"
    finally:
        asyncio.run(_schema(url, f'DROP SCHEMA "{schema}" CASCADE'))


async def _schema(url: str, statement: str) -> None:
    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.execute(sa.text(statement))
    finally:
        await engine.dispose()
