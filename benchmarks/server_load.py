"""Section 5: concurrent streaming chat sessions held by `toolwire serve` (scripted model, loopback).

The server runs in its own process (`python -m toolwire.cli serve`, SQLite store in a temp dir); this
process is the load generator. Each session POSTs /api/chat and streams the AI SDK UI stream: the model
calls a tool that holds for `--hold` seconds (so all sessions are open at once), then answers. Measured:
sessions completed, time to first event (first SSE data frame after the request), and the server's
resident memory per held session (peak RSS while all are open minus RSS before the load).

Every session's request is sent in the same instant: the connections are opened first (a warm-up
request each), then all requests are released together. The default load generator (`--client raw`)
writes prebuilt requests on plain asyncio sockets and only scans the answers for the first frame and
`[DONE]`: with httpx (`--client httpx`) the load generator's own per-request work, on the same 2 cores,
delayed the requests themselves by seconds (measured: TTFE p50 8.1 s with httpx, 1.4 s raw, same server).

`--store postgres` runs the server on PostgreSQL (`TOOLWIRE_TEST_POSTGRES_URL`, in a schema of its own,
dropped afterwards) instead of a SQLite file.

    python benchmarks/server_load.py [--sessions 100 200] [--hold 3] [--store sqlite|postgres] [--client raw|httpx]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]

AGENT_MODULE = '''
import asyncio, os
from toolwire import Agent, TextPart, ToolCallPart
from toolwire.models.scripted import ScriptedModel

async def hold(seconds: float) -> str:
    """Holds the session open."""
    await asyncio.sleep(seconds)
    return "held"

def build():
    hold_for = float(os.environ["TW_HOLD"])
    turn = [TextPart(text="Checking."), ToolCallPart(tool_call_id="h", tool_name="hold", args={"seconds": hold_for})]
    turns = []
    for _ in range(int(os.environ["TW_SESSIONS"])):
        turns += [turn, [TextPart(text="All done, the session was held and answered.")]]
    # One scripted model serves every session; turns are taken in request order, and every session's
    # first request comes before any second one (each holds for seconds), so call/answer pairs line up.
    return Agent(ScriptedModel(turns, record_requests=False), tools=[hold])
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    async with httpx.AsyncClient() as client:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError("the server exited: " + log.read_text())
            try:
                await client.get(url + "/api/sessions")
                return
            except httpx.HTTPError:
                await asyncio.sleep(0.1)
    raise RuntimeError("the server did not start")


async def _httpx_session(client: httpx.AsyncClient, index: int, go: asyncio.Event) -> tuple[float, bool]:
    body = {
        "id": f"load-{index}",
        "messages": [{"role": "user", "parts": [{"type": "text", "text": "hold"}]}],
    }
    await client.get("/api/sessions")  # opens this session's connection before the burst
    await go.wait()
    started = time.perf_counter()
    first: float | None = None
    finished = False
    try:
        async with client.stream("POST", "/api/chat", json=body) as response:
            if response.status_code != 200:
                return float("nan"), False
            async for line in response.aiter_lines():
                if line.startswith("data: ") and first is None:
                    first = time.perf_counter() - started
                if line == "data: [DONE]":
                    finished = True
    except httpx.TransportError:  # counted as not completed (the table shows how many completed)
        pass
    return (first if first is not None else float("nan")), finished


class _RawSession:
    """One session on a plain asyncio socket: the request bytes are built before the burst and written in
    one call, and the answer is only scanned for the first SSE frame and ``[DONE]``, so the load
    generator's own cost (httpx's per-request work, ~1 ms, shared with the server on the same cores)
    does not hide the server's time to first event."""

    def __init__(self, port: int, index: int) -> None:
        self.port = port
        body = json.dumps(
            {
                "id": f"load-{index}",
                "messages": [{"role": "user", "parts": [{"type": "text", "text": "hold"}]}],
            }
        ).encode()
        self.request = (
            f"POST /api/chat HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\n\r\n"
        ).encode() + body
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def connect(self) -> None:
        """Open the connection and complete one warm-up request on it (the server has accepted it)."""
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        self.writer.write(f"GET /api/sessions HTTP/1.1\r\nhost: 127.0.0.1:{self.port}\r\n\r\n".encode())
        head = await self.reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        await self.reader.readexactly(length)

    def send(self) -> float:
        assert self.writer is not None
        self.writer.write(self.request)
        return time.perf_counter()

    async def receive(self, started: float) -> tuple[float, bool]:
        assert self.reader is not None and self.writer is not None
        first: float | None = None
        tail = b""
        try:
            head = await self.reader.readuntil(b"\r\n\r\n")
            if not head.startswith(b"HTTP/1.1 200"):
                return float("nan"), False
            while chunk := await self.reader.read(65536):
                window = tail + chunk  # a frame split across two reads is still found
                if first is None and b"data: " in window:
                    first = time.perf_counter() - started
                if b"data: [DONE]" in window:
                    return first if first is not None else float("nan"), True
                tail = window[-16:]
        except (OSError, asyncio.IncompleteReadError):  # counted as not completed
            pass
        finally:
            self.writer.close()
        return (first if first is not None else float("nan")), False


async def _raw_burst(port: int, sessions: int, watch: Any) -> list[tuple[float, bool]]:
    clients = [_RawSession(port, i) for i in range(sessions)]
    await asyncio.gather(*(c.connect() for c in clients))
    await asyncio.sleep(0.1)
    started = [c.send() for c in clients]  # every request written before any answer is read
    tasks = [asyncio.create_task(c.receive(t)) for c, t in zip(clients, started, strict=True)]
    await watch(tasks)
    return [t.result() for t in tasks]


async def _httpx_burst(url: str, sessions: int, watch: Any) -> list[tuple[float, bool]]:
    limits = httpx.Limits(max_connections=sessions + 10, max_keepalive_connections=sessions + 10)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
        go = asyncio.Event()
        tasks = [asyncio.create_task(_httpx_session(client, i, go)) for i in range(sessions)]
        while len(client._transport._pool.connections) < sessions:  # type: ignore[attr-defined]
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.1)  # every warm-up answered and its connection idle again
        go.set()
        await watch(tasks)
        return [t.result() for t in tasks]


async def _postgres_schema(action: str, schema: str) -> str:
    """Create or drop a schema of its own on the test PostgreSQL; returns the store URL using it."""
    from sqlalchemy.ext.asyncio import create_async_engine

    url = os.environ["TOOLWIRE_TEST_POSTGRES_URL"]
    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            statement = f"CREATE SCHEMA {schema}" if action == "create" else f"DROP SCHEMA {schema} CASCADE"
            await conn.exec_driver_sql(statement)
    finally:
        await engine.dispose()
    return f"{url}?schema={schema}"


async def run_level(sessions: int, hold: float, store: str = "sqlite", client: str = "raw") -> dict[str, Any]:
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    schema = f"perf_server_load_{os.getpid()}"
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "loadagent.py").write_text(AGENT_MODULE)
        env = dict(
            os.environ,
            PYTHONPATH=f"{tmp}{os.pathsep}{ROOT / 'src'}",
            TW_HOLD=str(hold),
            TW_SESSIONS=str(sessions),
        )
        command = [sys.executable, "-m", "toolwire.cli", "serve", "loadagent:build", "--port", str(port)]
        if store == "postgres":
            command += ["--store", await _postgres_schema("create", schema)]
        else:
            command += ["--store", f"sqlite+aiosqlite:///{tmp}/load.db"]
        # The server's log goes to a file: a pipe nobody reads fills up (64 KiB, an INFO line per request)
        # and would then block the server's event loop on its next log line.
        log = Path(tmp, "server.log")
        with log.open("wb") as log_file:
            server = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=log_file)
        try:
            await _wait_ready(url, server, log)
            baseline = _rss_kib(server.pid)
            peak = baseline

            async def watch(tasks: list[asyncio.Task[tuple[float, bool]]]) -> None:
                nonlocal peak
                while not all(t.done() for t in tasks):
                    peak = max(peak, _rss_kib(server.pid))
                    await asyncio.sleep(0.05)

            if client == "raw":
                results = await _raw_burst(port, sessions, watch)
            else:
                results = await _httpx_burst(url, sessions, watch)
        finally:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                server.kill()
            if store == "postgres":
                await _postgres_schema("drop", schema)
    ttfe = sorted(r[0] * 1000 for r in results if r[0] == r[0])
    completed = sum(1 for r in results if r[1])
    return {
        "store": store,
        "client": client,
        "sessions": sessions,
        "completed": completed,
        "ttfe_p50_ms": statistics.median(ttfe) if ttfe else None,
        "ttfe_p99_ms": ttfe[min(len(ttfe) - 1, int(len(ttfe) * 0.99))] if ttfe else None,
        "rss_baseline_mib": baseline / 1024,
        "rss_peak_mib": peak / 1024,
        "kib_per_session": (peak - baseline) / sessions,
    }


def run(quick: bool = False) -> list[dict[str, Any]]:
    levels = [50] if quick else [50, 200, 500]
    stores = (
        ["sqlite", "postgres"] if os.environ.get("TOOLWIRE_TEST_POSTGRES_URL") and not quick else ["sqlite"]
    )
    return [asyncio.run(run_level(n, hold=1.0 if quick else 4.0, store=s)) for s in stores for n in levels]


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| store | client | sessions | completed | TTFE p50 (ms) | TTFE p99 (ms) | server RSS before / peak (MiB) | KiB per held session |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['store']} | {r['client']} | {r['sessions']} | {r['completed']} | {r['ttfe_p50_ms']:.1f} | {r['ttfe_p99_ms']:.1f} | "
            f"{r['rss_baseline_mib']:.0f} / {r['rss_peak_mib']:.0f} | {r['kib_per_session']:.0f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", type=int, nargs="*", default=None)
    parser.add_argument("--hold", type=float, default=4.0)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument(
        "--client",
        choices=["raw", "httpx"],
        default="raw",
        help="load generator (raw: plain asyncio sockets)",
    )
    args = parser.parse_args()
    if args.sessions:
        rows = [asyncio.run(run_level(n, args.hold, args.store, args.client)) for n in args.sessions]
    else:
        rows = run(quick=args.quick)
    print(json.dumps(rows, indent=2) if args.json else table(rows))


if __name__ == "__main__":
    main()
