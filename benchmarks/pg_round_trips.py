"""Network round trips per store hook call on PostgreSQL, counted on the wire.

A TCP relay on loopback sits between the store (asyncpg) and PostgreSQL and counts the client's sends
that are followed by a server reply: one per request the client waits on (a statement, a BEGIN, a
COMMIT, a pre-ping). Every hook method of the store is wrapped to attribute the round trips of its
call. The agent runs `steps` tool interactions (model step calling a no-op tool, then the final text),
exactly what section 4 of BENCHMARKS.md times.

    export "$(bash scripts/postgres.sh | grep ^TOOLWIRE_TEST_POSTGRES_URL=)"
    .venv/bin/python benchmarks/pg_round_trips.py [--steps 50]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url

sys.path.insert(0, str(Path(__file__).parent))
from persistence import ToolThenText, noop  # noqa: E402

from toolwire import Agent  # noqa: E402
from toolwire.store.sql import SQLStore  # noqa: E402

HOOKS = (
    "ensure_session",
    "lock_session",
    "raw_messages",
    "tool_calls",
    "append_message",
    "set_title",
    "begin_step",
    "complete_tool_call",
    "finish_step",
    "unlock_session",
)


class Relay:
    """Forwards bytes both ways; counts client sends that the server then answers (round trips)."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.round_trips = 0
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._client, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        waiting = False

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter, client_side: bool) -> None:
            nonlocal waiting
            while data := await src.read(65536):
                if client_side:
                    waiting = True
                elif waiting:  # the first bytes of a reply end one round trip
                    waiting = False
                    self.round_trips += 1
                dst.write(data)
                await dst.drain()
            dst.close()

        await asyncio.gather(
            pump(reader, up_writer, True), pump(up_reader, writer, False), return_exceptions=True
        )


async def main(steps: int) -> None:
    url = make_url(os.environ["TOOLWIRE_TEST_POSTGRES_URL"])
    relay = Relay(url.host or "127.0.0.1", url.port or 5432)
    port = await relay.start()
    store = await SQLStore.open(url.set(port=port).render_as_string(hide_password=False))
    per_hook: dict[str, list[int]] = defaultdict(list)
    for name in HOOKS:
        method = getattr(store, name)

        async def counted(*args: Any, _method: Any = method, _name: str = name, **kwargs: Any) -> Any:
            before = relay.round_trips
            try:
                return await _method(*args, **kwargs)
            finally:
                per_hook[_name].append(relay.round_trips - before)

        setattr(store, name, counted)
    agent = Agent(
        ToolThenText(steps), tools=[noop], store=store, max_steps=steps + 2, heartbeat_interval=None
    )
    await agent.run("warm-up", session_id=f"warm-{uuid.uuid4().hex[:6]}")  # prepared statements cached
    per_hook.clear()
    before = relay.round_trips
    result = await agent.run("go", session_id=f"rt-{uuid.uuid4().hex[:6]}")
    total = relay.round_trips - before
    await store.close()
    assert len(result.tool_executions) == steps
    print(f"{steps} tool interactions, {total} round trips: {total / steps:.1f} per interaction")
    print("| hook call | calls | round trips per call (median) |")
    print("|---|---:|---:|")
    for name in HOOKS:
        counts = sorted(per_hook.get(name, []))
        if counts:
            print(f"| {name} | {len(counts)} | {counts[len(counts) // 2]} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=50)
    asyncio.run(main(parser.parse_args().steps))
