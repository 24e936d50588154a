"""The shared event log (PostgreSQL) on a long conversation with large events: what an idle resume and a
slow reader's replay cost.

1. Idle resume: ``GET /api/chat/{id}/stream`` asks the log for the session's open turn. Before (commit
   a0362df) that parsed the last 10,000 event bodies as ``jsonb``; now the markers are columns read through
   a partial index. Both queries run here on the same table, median of ``--repeat`` runs.
2. Replay: a reader resuming from cursor 0 — the replica's peak Python allocation (tracemalloc) while it
   opens the subscription, with the byte bound (``replay_bytes``, 4 MB) and without it (the count bound
   alone, as before).

    export "$(bash scripts/postgres.sh | grep ^TOOLWIRE_TEST_POSTGRES_URL=)"
    .venv/bin/python benchmarks/event_log_resume.py [--events 10000 --chars 10000 --repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
import tracemalloc
import uuid

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

from toolwire.events import InteractionEnd, InteractionStart, TextDeltaEvent
from toolwire.server.hub import StreamKey
from toolwire.server.shared_hub import SharedEventHub
from toolwire.store.sql import SQLStore

# The query of commit a0362df (issue 32 item 11), kept here to measure against.
_BEFORE = """
SELECT id, kind, status FROM (
    SELECT id, body::jsonb ->> 'type' AS kind, body::jsonb ->> 'status' AS status
    FROM (SELECT id, body FROM toolwire_events WHERE stream = $1 AND session_id = $1
          ORDER BY id DESC LIMIT $2) AS tail
) AS typed
WHERE kind IN ('interaction-start', 'interaction-end', 'user-turn-start')
ORDER BY id DESC
"""


async def main(events: int, chars: int, repeat: int) -> None:
    url = os.environ["TOOLWIRE_TEST_POSTGRES_URL"]
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    admin = create_async_engine(url)
    async with admin.begin() as conn:
        await conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    store = await SQLStore.open(f"{url}?schema={schema}")  # the store's tables, as on a server
    await store.close()
    engine = create_async_engine(url, connect_args={"server_settings": {"search_path": schema}})
    hub = SharedEventHub(engine, replay_limit=events + 10)
    await hub.start()
    try:
        key = StreamKey("conv", 1)
        hub.publish(InteractionStart(session_id="conv", seq=1), 1)
        for seq in range(2, events):
            hub.publish(
                TextDeltaEvent(session_id="conv", seq=seq, id="t", delta="x" * chars, message_id="m"), 1
            )
        hub.publish(InteractionEnd(session_id="conv", seq=events, status="completed"), 1)
        while await hub.log.max_id(*key) == 0 or len(await hub.log.after_seq(*key, events - 1, 2)) < 1:
            await asyncio.sleep(0.1)

        async def timed(coro_factory: object) -> float:
            samples = []
            for _ in range(repeat):
                started = time.perf_counter()
                await coro_factory()  # type: ignore[operator]
                samples.append(time.perf_counter() - started)
            return statistics.median(samples)

        before = await timed(lambda: hub.log._query("fetch", _BEFORE, "conv", 10_000))
        after = await timed(lambda: hub.open_turn(key))
        print(f"{events} events of {chars} characters ({events * chars / 1e6:.0f} MB of bodies)")
        print(f"idle resume (find the open turn): before {before * 1000:.1f} ms, now {after * 1000:.2f} ms")

        for label, bound in (("byte bound 4 MB", 4_000_000), ("count bound only (before)", 10**12)):
            hub.replay_bytes = bound
            tracemalloc.start()
            subscription = await hub.open(key, after=0)
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            subscription.close()
            print(f"replay from 0, {label}: peak {peak / 1e6:.1f} MB allocated")
    finally:
        await hub.close()
        await engine.dispose()
        async with admin.begin() as conn:
            await conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        await admin.dispose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--chars", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(main(args.events, args.chars, args.repeat))
