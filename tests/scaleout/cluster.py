"""Real replicas for the scale-out tests: a fresh PostgreSQL schema, N ``python -m toolwire.cli serve``
processes on it and HAProxy (Debian's package) round-robin in front, all on loopback."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from tests.reliability.pg_outage import CuttableLink

ROOT = Path(__file__).parents[2]
POSTGRES_ENV = "TOOLWIRE_TEST_POSTGRES_URL"

# The model answers from the history (not from a per-process script), so whichever replica runs the
# next step answers the same; every model call is logged with the replica's pid.
AGENT_MODULE = '''
import asyncio, os
from pathlib import Path
from toolwire import Agent, TextPart, ToolCallPart
from toolwire.models.scripted import ScriptedModel

DIR = Path(os.environ["TW_DIR"])

async def work(step: int) -> str:
    """Does slow work."""
    (DIR / f"started-{os.getpid()}").write_text(str(step))
    with open(DIR / "work-calls", "a") as f:  # one line per execution: a non-idempotent side effect
        f.write(f"{os.getpid()}\\n")
    await asyncio.sleep(float(os.environ["TW_SLOW"]))
    return f"step {step} worked"

def respond(request):
    with open(DIR / "model-calls", "a") as f:
        f.write(f"{os.getpid()}\\n")
    last = request.messages[-1]
    if last.role == "user":
        return [TextPart(text="Working on it, " + "step by step. " * 4),
                ToolCallPart(tool_call_id="call_" + str(len(request.messages)), tool_name="work",
                             args={"step": 1})]
    results = [r for r in last.tool_results]
    if results and results[0].is_error:
        return [TextPart(text="The work was interrupted; I stopped there.")]
    return [TextPart(text="Done: " + str(results[0].output if results else ""))]

def build():
    return Agent(ScriptedModel(respond, chunk_size=8), tools=[work])
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Replica:
    port: int
    process: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@dataclass
class Cluster:
    store_url: str
    directory: Path
    replicas: list[Replica]
    balancer_port: int
    haproxy: subprocess.Popen[bytes] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    slow: float = 0.3

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.balancer_port}"

    def by_pid(self, pid: int) -> Replica:
        return next(r for r in self.replicas if r.process.pid == pid)

    def executing(self) -> Replica | None:
        """The replica whose tool started (it wrote ``started-<pid>``)."""
        for path in self.directory.glob("started-*"):
            return self.by_pid(int(path.name.split("-")[1]))
        return None

    def work_calls(self) -> list[int]:
        """The pid of each execution of the ``work`` tool, in order."""
        path = self.directory / "work-calls"
        return [int(line) for line in path.read_text().split()] if path.exists() else []

    def model_calls(self) -> list[int]:
        path = self.directory / "model-calls"
        return [int(line) for line in path.read_text().split()] if path.exists() else []

    def kill(self, replica: Replica) -> None:
        replica.process.send_signal(signal.SIGKILL)
        assert replica.process.wait(10) == -signal.SIGKILL

    async def restart(self, replica: Replica) -> Replica:
        """A new server on the port of ``replica`` (which has exited), in its place once it is healthy."""
        assert replica.process.poll() is not None, "restart only a replica that has exited"
        fresh = Replica(replica.port, _serve(self.directory, self.store_url, replica.port, self.slow))
        self.replicas[self.replicas.index(replica)] = fresh  # the cluster's teardown stops it too
        await _wait_healthy(fresh.url, fresh.process, self.directory / f"replica-{fresh.port}.log")
        return fresh


def postgres_url() -> str:
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        if os.environ.get("CI"):
            pytest.fail(f"{POSTGRES_ENV} is needed in CI (scripts/postgres.sh sets it up)")
        pytest.skip(f"no PostgreSQL ({POSTGRES_ENV})")
    return url


@asynccontextmanager
async def fresh_schema(prefix: str) -> AsyncIterator[str]:
    """A new schema on the test PostgreSQL (dropped afterwards); yields the store URL for it."""
    url = postgres_url()
    schema = f"{prefix}_{uuid.uuid4().hex[:10]}"
    # Pre-ping: a test may restart PostgreSQL, which closes the connection the drop would reuse.
    admin = create_async_engine(make_url(url).set(drivername="postgresql+asyncpg"), pool_pre_ping=True)
    async with admin.begin() as conn:
        await conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    try:
        yield f"{url}?schema={schema}"
    finally:
        async with admin.begin() as conn:
            await conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        await admin.dispose()


def _serve(directory: Path, store_url: str, port: int, slow: float) -> subprocess.Popen[bytes]:
    env = dict(
        os.environ,
        PYTHONPATH=f"{directory}{os.pathsep}{ROOT / 'src'}",
        TW_DIR=str(directory),
        TW_SLOW=str(slow),
    )
    command = [sys.executable, "-m", "toolwire.cli", "serve", "agentmod:build", "--port", str(port)]
    command += ["--store", store_url]  # nothing else: a PostgreSQL store makes it one of N replicas
    # Appended to: a replica restarted on the same port keeps its predecessor's log.
    log = open(directory / f"replica-{port}.log", "ab")  # noqa: SIM115 - the child writes it
    return subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)


def _haproxy(directory: Path, port: int, replicas: list[Replica]) -> subprocess.Popen[bytes]:
    binary = shutil.which("haproxy")
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail("haproxy is needed in CI (scripts/setup_haproxy.sh installs it)")
        pytest.skip("no haproxy (scripts/setup_haproxy.sh installs it)")
    servers = "\n".join(
        f"    server r{i} 127.0.0.1:{r.port} check inter 300ms fall 1 rise 1" for i, r in enumerate(replicas)
    )
    config = directory / "haproxy.cfg"
    config.write_text(
        f"""global
    maxconn 500
defaults
    mode http
    retries 3
    option redispatch
    option http-no-delay
    timeout connect 2s
    timeout client 120s
    timeout server 120s
    timeout tunnel 120s
frontend toolwire
    bind 127.0.0.1:{port}
    default_backend replicas
backend replicas
    balance roundrobin
    option httpchk
    http-check send meth GET uri /api/health ver HTTP/1.1 hdr Host 127.0.0.1
    timeout check 3s
{servers}
"""
    )
    log = open(directory / "haproxy.log", "wb")  # noqa: SIM115 - the child writes it
    return subprocess.Popen([binary, "-db", "-f", str(config)], stdout=log, stderr=subprocess.STDOUT)


async def _wait_healthy(url: str, child: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    async with httpx.AsyncClient(timeout=2) as client:
        while True:
            assert child.poll() is None, log.read_text()[-3000:] if log.exists() else "exited"
            assert time.monotonic() < deadline, f"{url} did not become healthy"
            try:
                if (await client.get(f"{url}/api/health")).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.1)


@asynccontextmanager
async def cluster(
    directory: Path,
    *,
    replicas: int = 3,
    slow: float = 0.3,
    lease: float = 2.0,
    agent_module: str = AGENT_MODULE,
    link: CuttableLink | None = None,
) -> AsyncIterator[Cluster]:
    """``replicas`` servers on one fresh schema (run leases of ``lease`` seconds) behind HAProxy, serving
    ``agent_module``'s ``build()``; ``link``: the replicas reach PostgreSQL through it (so the test can cut
    them off the database)."""
    (directory / "agentmod.py").write_text(agent_module)
    async with fresh_schema("tw_scale") as store_url:
        store_url += f"&lease_ttl={lease}"
        replica_url = link.url(store_url) if link is not None else store_url
        started: list[Replica] = []
        proxy: subprocess.Popen[bytes] | None = None
        try:
            for _ in range(replicas):
                port = free_port()
                started.append(Replica(port, _serve(directory, replica_url, port, slow)))
            for replica in started:
                await _wait_healthy(replica.url, replica.process, directory / f"replica-{replica.port}.log")
            balancer_port = free_port()
            proxy = _haproxy(directory, balancer_port, started)
            result = Cluster(store_url, directory, started, balancer_port, proxy, slow=slow)
            await _wait_healthy(result.url, proxy, directory / "haproxy.log")
            yield result
        finally:
            for child in [*(r.process for r in started), *([proxy] if proxy else [])]:
                if child.poll() is None:
                    child.send_signal(signal.SIGCONT)  # a test that stopped one and failed: let it exit
                    child.terminate()
            for child in [*(r.process for r in started), *([proxy] if proxy else [])]:
                try:
                    child.wait(15)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait(5)
