"""Scale-out on one PostgreSQL: N real ``toolwire serve`` replicas behind HAProxy (round-robin).

For 1, 2 and 3 replicas: interactions per second and time to first event (TTFE: request sent -> first
AI SDK data frame) p50/p99 of `clients` concurrent clients each running `turns` chat turns through the
balancer (one turn = model step calling a tool, the tool, the final answer: everything stored, every
event written to the shared event log). Then the takeover time: SIGKILL of the replica running a
tool -> the continuation's first event on a client stream held on another replica, for the default
lease (6 s) and a 2 s lease.

The load generator, the replicas, HAProxy and PostgreSQL share this machine's cores: compare the rows
with each other, not with other machines.

    export "$(bash scripts/postgres.sh | grep ^TOOLWIRE_TEST_POSTGRES_URL=)"
    bash scripts/setup_haproxy.sh
    .venv/bin/python benchmarks/scaleout.py [--clients 16 --turns 8]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parents[1]))
from tests.scaleout.cluster import cluster  # noqa: E402
from tests.scaleout.streams import follow  # noqa: E402


async def _turn(http: httpx.AsyncClient, url: str, session_id: str, text: str) -> float:
    body = {"id": session_id, "messages": [{"role": "user", "parts": [{"type": "text", "text": text}]}]}
    started = time.perf_counter()
    first: float | None = None
    async with http.stream("POST", f"{url}/api/chat", json=body) as response:
        assert response.status_code == 200, await response.aread()
        async for line in response.aiter_lines():
            if first is None and line.startswith("data: "):
                first = time.perf_counter() - started
            if line == "data: [DONE]":
                break
    assert first is not None
    return first


async def load(replicas: int, clients: int, turns: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        async with cluster(Path(tmp), replicas=replicas, slow=0.0) as c:
            limits = httpx.Limits(max_connections=clients * 2)
            async with httpx.AsyncClient(timeout=120, limits=limits) as http:
                await _turn(http, c.url, "warm-up", "warm up")
                ttfe: list[float] = []

                async def client(i: int) -> None:
                    for t in range(turns):
                        ttfe.append(await _turn(http, c.url, f"bench-{i}", f"turn {t}"))

                started = time.perf_counter()
                await asyncio.gather(*(client(i) for i in range(clients)))
                elapsed = time.perf_counter() - started
    ttfe.sort()
    return {
        "replicas": replicas,
        "interactions_per_s": len(ttfe) / elapsed,
        "ttfe_p50_ms": statistics.median(ttfe) * 1e3,
        "ttfe_p99_ms": ttfe[min(len(ttfe) - 1, int(len(ttfe) * 0.99))] * 1e3,
    }


async def takeover(lease: float) -> float:
    """Seconds from SIGKILL of the replica running a tool to the continuation's first event elsewhere."""
    with tempfile.TemporaryDirectory() as tmp:
        async with cluster(Path(tmp), replicas=3, slow=600, lease=lease) as c:
            async with httpx.AsyncClient(timeout=120) as http:
                start = (await http.post(f"{c.url}/api/sessions", json={"session_id": "t"})).json()["cursor"]
                posted = await http.post(f"{c.url}/api/sessions/t/messages", json={"text": "work"})
                assert posted.status_code == 202
                while (victim := c.executing()) is None:
                    await asyncio.sleep(0.02)
                watcher = next(r for r in c.replicas if r is not victim)
                await asyncio.sleep(0.5)
                arrivals: list[float] = []

                async def watch() -> None:
                    headers = {"last-event-id": str(start)}
                    async with http.stream("GET", f"{watcher.url}/api/sessions/t/events", headers=headers) as r:
                        starts = 0
                        async for line in r.aiter_lines():
                            if '"type":"interaction-start"' in line.replace(" ", ""):
                                starts += 1
                                if starts == 2:
                                    arrivals.append(time.perf_counter())
                                    return

                task = asyncio.create_task(watch())
                await asyncio.sleep(0.5)
                killed = time.perf_counter()
                c.kill(victim)
                await asyncio.wait_for(task, 60)
                return arrivals[0] - killed


async def main(clients: int, turns: int) -> None:
    rows = [await load(n, clients, turns) for n in (1, 2, 3)]
    print(f"{clients} clients x {turns} turns each, through HAProxy")
    print("| replicas | interactions/s | TTFE p50 (ms) | TTFE p99 (ms) |")
    print("|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['replicas']:.0f} | {r['interactions_per_s']:.1f} | {r['ttfe_p50_ms']:.1f} | {r['ttfe_p99_ms']:.1f} |"
        )
    print("| lease TTL (s) | takeover after SIGKILL (s) |")
    print("|---:|---:|")
    for lease in (6.0, 2.0):
        print(f"| {lease:.0f} | {await takeover(lease):.2f} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--turns", type=int, default=8)
    args = parser.parse_args()
    asyncio.run(main(args.clients, args.turns))
