"""Three real replicas on one PostgreSQL behind HAProxy: a run executing on one replica is streamed
alike (events, order, cursors) by every replica, and a stream resumes by ``Last-Event-ID`` on any."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx

from tests.scaleout.cluster import cluster
from tests.scaleout.streams import check_stream, follow, follow_ws


async def test_every_replica_streams_the_run_alike_and_resumes_anywhere(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c, httpx.AsyncClient(timeout=60) as http:
        created = await http.post(f"{c.url}/api/sessions", json={"session_id": "conv"})
        assert created.status_code == 201
        start = created.json()["cursor"]
        followers = [asyncio.create_task(follow(http, r.url, "conv", after=start)) for r in c.replicas]
        sockets = [asyncio.create_task(follow_ws(r.url, "conv", after=start)) for r in c.replicas]
        posted = await http.post(f"{c.url}/api/sessions/conv/messages", json={"text": "do the work"})
        assert posted.status_code == 202
        streams = await asyncio.wait_for(asyncio.gather(*followers), 60)
        # The WebSocket of every replica carries the same items as the SSE streams.
        assert await asyncio.wait_for(asyncio.gather(*sockets), 60) == streams
        executing = c.executing()
        assert executing is not None
        # Every replica, the two that do not run the turn included, sent the same events with the
        # same cursors, in the same order.
        assert streams[0] == streams[1] == streams[2]
        frames = streams[0]
        check_stream(frames)
        types = [e["type"] for _, e in frames]
        assert types[0] == "interaction-start" and types[-1] == "interaction-end"
        assert types.count("tool-call-active") == 1 and types.count("tool-call-complete") == 1
        assert "".join(e.get("delta", "") for _, e in frames if e["type"] == "text-delta").endswith(
            "Done: step 1 worked"
        )

        # Resume from the middle, by Last-Event-ID, on each replica: exactly the rest, same cursors.
        middle = len(frames) // 2
        for replica in c.replicas:
            rest = await asyncio.wait_for(follow(http, replica.url, "conv", after=frames[middle][0]), 30)
            assert rest == frames[middle + 1 :]

        # A reload (through the balancer: any replica) gives the history and the cursor after it.
        history = (await http.get(f"{c.url}/api/sessions/conv/messages")).json()
        assert [m["role"] for m in history["messages"]] == ["user", "assistant", "tool", "assistant"]
        assert history["cursor"] == frames[-1][0]

        # The AI SDK stream of the next turn (served by the replica that runs it) and the native
        # streams of the other replicas carry the same run.
        followers = [
            asyncio.create_task(follow(http, r.url, "conv", after=history["cursor"])) for r in c.replicas
        ]
        chunks: list[dict[str, object]] = []
        body = {"id": "conv", "messages": [{"role": "user", "parts": [{"type": "text", "text": "again"}]}]}
        async with http.stream("POST", f"{c.url}/api/chat", json=body) as response:
            assert response.status_code == 200
            async for line in response.aiter_lines():
                if line.startswith("data: {"):
                    chunks.append(json.loads(line[6:]))
        second = await asyncio.wait_for(asyncio.gather(*followers), 60)
        assert second[0] == second[1] == second[2]
        check_stream(second[0], first_seq=frames[-1][1]["seq"] + 1)
        sdk_tools = [ch["toolCallId"] for ch in chunks if ch["type"] == "tool-output-available"]
        native_tools = [e["tool_call_id"] for _, e in second[0] if e["type"] == "tool-call-complete"]
        assert sdk_tools == native_tools and len(native_tools) == 1
        assert chunks[-1]["type"] == "finish"
