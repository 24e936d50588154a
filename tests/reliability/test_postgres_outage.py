"""PostgreSQL unreachable when a tool finishes (issue 32, item 10): the run keeps the outcome and retries its
write while its lease lasts, so after the outage the history holds the tool's real result, not an
``interrupted`` one (the model would be told the tool did not finish, and might run it again)."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest

from tests.reliability.pg_outage import cuttable_link
from tests.scaleout.cluster import fresh_schema
from toolwire import Agent, TextPart, ToolCallPart
from toolwire.messages import Message
from toolwire.models.scripted import ScriptedModel
from toolwire.store.sql import SQLStore


async def _until(condition: Any, what: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.02)


async def test_a_tool_finishing_while_postgresql_is_down_keeps_its_result(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, "toolwire.agent")
    async with fresh_schema("tw_outage") as url, cuttable_link(url) as link:
        direct = await SQLStore.open(url)
        store = await SQLStore.open(link.url(url) + "&lease_ttl=10")
        started, finish = asyncio.Event(), asyncio.Event()
        sent: list[str] = []

        async def transfer(to: str) -> str:
            """Send the money (not idempotent: never run it twice)."""
            started.set()
            await finish.wait()
            sent.append(to)
            return f"sent to {to}"

        def respond(request: Any) -> list[Any]:
            last: Message = request.messages[-1]
            if last.role == "user":
                return [ToolCallPart(tool_call_id="t1", tool_name="transfer", args={"to": "bob"})]
            return [TextPart(text=f"Done: {last.tool_results[0].output}")]

        try:
            agent = Agent(ScriptedModel(respond), tools=[transfer], store=store)
            run = asyncio.create_task(agent.run("pay bob", session_id="pay", user_id="u"))
            await asyncio.wait_for(started.wait(), 20)
            link.cut()  # the database is unreachable from now on
            finish.set()  # ... when the tool finishes
            await _until(
                lambda: run.done() or any("retrying a write" in r.getMessage() for r in caplog.records),
                "the run never tried to store the outcome",
            )
            assert not run.done(), run.exception()  # before the fix: StoreError, connection reset
            # Several attempts refused (the write retried, not given up): then the database is back.
            await _until(lambda: run.done() or link.refused >= 3, "no retry during the outage")
            assert not run.done(), run.exception()
            link.restore()
            result = await asyncio.wait_for(run, 30)
            assert result.status == "completed"
            assert result.output == "Done: sent to bob"
            assert sent == ["bob"]
            [row] = await direct.tool_calls("pay")
            assert (row.status, row.output) == ("ok", "sent to bob")
            history = await direct.load_history("pay")
            assert [m.role for m in history] == ["user", "assistant", "tool", "assistant"]
            assert history[2].tool_results[0].output == "sent to bob"
            assert history[2].tool_results[0].is_error is False
        finally:
            link.restore()
            await store.close()
            await direct.close()
