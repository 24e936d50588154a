"""An MCP server's question (``elicitation/create``) as a durable pause (issue 29 item 4): with no
``elicitation_handler``, the call waits ``awaiting_input``, the run pauses, and the answer comes like a
client tool's output. A real MCP server (the SDK's, over stdio and streamable HTTP) asks; in one process the
same call goes on, after the process is killed the call is made again and the earlier answers replayed."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from toolwire import Agent, TextPart, ToolCallPart, open_store
from toolwire.errors import ResumeError
from toolwire.events import ToolCallAwaiting
from toolwire.models.scripted import ScriptedModel
from toolwire.store import MemoryStore, Store
from toolwire.tools.context import RunContext
from toolwire.tools.mcp import ElicitationAnswer, MCPServerStdio

SERVER = Path(__file__).parent / "_mcp_server.py"
WORKER = Path(__file__).parent / "_asking_worker.py"
BOOK = ToolCallPart(tool_call_id="b1", tool_name="book", args={"place": "Chez Toolwire"})
TRIP = ToolCallPart(tool_call_id="t1", tool_name="trip", args={"city": "Lisbon"})


def said(output: Any) -> str:
    """A tool's text, whether the server gave it structured (``{"result": ...}``) or not."""
    return str(output["result"] if isinstance(output, dict) and "result" in output else output)


async def count(source: Any) -> int:
    """The calls that reached the server's process (this one included)."""
    return int(said(await source.call("count", {})))


def agent_for(source: Any, call: ToolCallPart | None, store: Store | None = None) -> Agent[None]:
    """An agent whose model makes ``call`` (``None``: a process that only answers: the call was made by
    another one), then answers "done"."""
    script = [[call], [TextPart("done")]] if call is not None else [[TextPart("done")]]
    return Agent(ScriptedModel(script), tools=[source], store=store or MemoryStore())


async def test_the_question_pauses_the_run_and_the_answer_continues_the_same_call(servers: Any) -> None:
    source = servers()
    before = await count(source)
    store = MemoryStore()
    agent = agent_for(source, BOOK, store)
    events = [e async for e in agent.stream("book a table", session_id="s")]
    [awaiting] = [e for e in events if isinstance(e, ToolCallAwaiting)]
    assert (awaiting.kind, awaiting.tool_call_id, awaiting.tool_name) == ("input", "b1", "book")
    assert awaiting.question is not None
    assert awaiting.question["message"] == "When, and for how many, at Chez Toolwire?"
    assert set(awaiting.question["requested_schema"]["properties"]) == {"date", "seats"}
    assert awaiting.question["server"] == source.source_name
    [pending] = await agent.pending("s")
    assert pending.kind == "input" and pending.question is not None
    assert pending.question.message == awaiting.question["message"]
    [row] = await store.tool_calls("s")
    assert row.status == "awaiting_input"

    result = await agent.run(session_id="s", tool_outputs={"b1": {"date": "2026-12-24", "seats": 4}})
    assert result.status == "completed" and result.pending == []
    [execution] = result.tool_executions
    assert said(execution.result.output) == "booked Chez Toolwire on 2026-12-24 for 4"
    # One call reached the server, continued with the answer (plus the two counting calls).
    assert await count(source) == before + 2
    [row] = await store.tool_calls("s")
    assert (row.status, said(row.output)) == ("ok", "booked Chez Toolwire on 2026-12-24 for 4")
    history = await store.load_history("s")
    assert [m.role for m in history] == ["user", "assistant", "tool", "assistant"]


async def test_two_questions_in_one_call_pause_twice_and_a_decline_is_passed_on(servers: Any) -> None:
    source = servers()
    agent = agent_for(source, TRIP)
    first = await agent.run("plan a trip", session_id="s")
    [asked] = first.pending
    assert first.status == "paused" and asked.question is not None
    assert asked.question.message == "Which dates for Lisbon?"
    second = await agent.run(session_id="s", tool_outputs={"t1": {"start": "2027-05-01", "nights": 3}})
    [asked] = second.pending
    assert second.status == "paused" and asked.question is not None
    assert asked.question.message == "Window or aisle?"
    assert asked.question.requested_schema["properties"]["seat"]["enum"] == ["window", "aisle"]
    done = await agent.run(session_id="s", tool_outputs={"t1": {"action": "decline"}})
    assert done.status == "completed"
    assert said(done.tool_executions[0].result.output) == "no seat: decline"


async def test_a_bad_answer_is_refused_before_anything_runs(servers: Any) -> None:
    source = servers()
    store = MemoryStore()
    agent = agent_for(source, BOOK, store)
    await agent.run("book a table", session_id="s")
    wrong = [
        ("tomorrow", "object"),
        ({"date": "today"}, "'seats' is required"),
        ({"date": "today", "seats": "four"}, "'seats' must be an integer"),
        ({"date": "today", "seats": 2, "pets": True}, "'pets' is not a field of the form"),
        ({"action": "accept", "content": "yes"}, "content must be an object"),
    ]
    for answer, problem in wrong:
        with pytest.raises(ResumeError, match=problem):
            await agent.run(session_id="s", tool_outputs={"b1": answer})
    with pytest.raises(ResumeError, match="asks a question: give its answer in tool_outputs"):
        await agent.run(session_id="s", approvals={"b1": True})
    [row] = await store.tool_calls("s")
    assert row.status == "awaiting_input"  # nothing was lost: it still waits, and can be answered
    result = await agent.run(session_id="s", tool_outputs={"b1": ElicitationAnswer(action="cancel")})
    assert said(result.tool_executions[0].result.output) == "not booked: cancel"


async def test_a_new_prompt_closes_the_question_unanswered(servers: Any) -> None:
    source = servers()
    model = ScriptedModel([[BOOK], [TextPart("never mind")]])
    store = MemoryStore()
    agent = Agent(model, tools=[source], store=store)
    await agent.run("book a table", session_id="s")
    result = await agent.run("forget it", session_id="s")
    assert result.status == "completed" and result.output == "never mind"
    [row] = await store.tool_calls("s")
    assert row.status == "unanswered"


async def test_after_the_process_is_killed_the_call_is_made_again_with_the_earlier_answers(
    tmp_path: Path,
) -> None:
    """The first process pauses on trip's first question and is SIGKILLed with the MCP call open; this
    process answers both questions: the second after the call is made again, its first question answered
    from the stored answer without asking anyone."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'asked.db'}"
    worker = subprocess.Popen(
        [sys.executable, str(WORKER), url, "s"],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        assert worker.stdout is not None
        line = await asyncio.to_thread(worker.stdout.readline)
        paused = json.loads(line)
        assert paused["status"] == "paused"
        [pending] = paused["pending"]
        assert (pending["kind"], pending["question"]["message"]) == ("input", "Which dates for Lisbon?")
    finally:
        worker.send_signal(signal.SIGKILL)
        worker.wait()
    store = await open_store(url)
    source = MCPServerStdio(sys.executable, [str(SERVER), "stdio"], timeout=10)
    try:
        agent = agent_for(source, None, store)
        [pending] = await agent.pending("s")
        assert pending.kind == "input" and pending.question is not None
        second = await agent.run(session_id="s", tool_outputs={"t1": {"start": "2027-05-01", "nights": 3}})
        [asked] = second.pending
        assert asked.question is not None and asked.question.message == "Window or aisle?"
        [row] = await store.tool_calls("s")
        assert [a["answer"]["content"] for a in row.output["answered"]] == [
            {"start": "2027-05-01", "nights": 3}
        ]
        await source.aclose()  # this process "restarts" too: the next answer makes the call again
        source = MCPServerStdio(sys.executable, [str(SERVER), "stdio"], timeout=10)
        agent = agent_for(source, None, store)
        before = await count(source)
        done = await agent.run(session_id="s", tool_outputs={"t1": {"seat": "window"}})
        assert done.status == "completed"
        assert (
            said(done.tool_executions[0].result.output) == "Lisbon from 2027-05-01 for 3 nights, window seat"
        )
        assert await count(source) == before + 2  # made again once (plus the counting calls)
    finally:
        await source.aclose()
        await store.close()


async def test_two_sessions_waiting_on_one_server_each_get_their_own_answer(servers: Any) -> None:
    """Session a's call waits for its answer while session b's call asks: the question goes to b (a's call
    cannot ask again while it waits), and each answer reaches its own call."""
    source = servers()
    store = MemoryStore()
    first = await agent_for(source, BOOK, store).run("book", session_id="a")
    second = await agent_for(source, BOOK, store).run("book", session_id="b")
    assert [(p.session_id, p.kind) for p in (*first.pending, *second.pending)] == [
        ("a", "input"),
        ("b", "input"),
    ]
    answer_b = await agent_for(source, None, store).run(
        session_id="b", tool_outputs={"b1": {"date": "b-day", "seats": 2}}
    )
    answer_a = await agent_for(source, None, store).run(
        session_id="a", tool_outputs={"b1": {"date": "a-day", "seats": 1}}
    )
    assert said(answer_a.tool_executions[0].result.output) == "booked Chez Toolwire on a-day for 1"
    assert said(answer_b.tool_executions[0].result.output) == "booked Chez Toolwire on b-day for 2"


def test_a_question_while_calls_of_two_sessions_run_is_asked_of_nobody() -> None:
    """The SDK does not say which call a server's request belongs to: with calls of two sessions in flight
    (neither waiting for an answer) nobody is asked; with one session's calls, its latest call is."""
    source = MCPServerStdio(sys.executable, [str(SERVER), "stdio"])

    def ctx(session: str, call: str) -> RunContext[None]:
        return RunContext(
            deps=None,
            session_id=session,
            user_session_id=session,
            interaction_id="i",
            call=ToolCallPart(tool_call_id=call, tool_name="book", args={}),
        )

    source._serving.extend([ctx("a", "c1"), ctx("a", "c2")])
    asker = source._asker()
    assert asker is not None and asker.tool_call_id == "c2"
    source._serving.append(ctx("b", "c1"))
    assert source._asker() is None


async def test_a_question_asked_in_a_sub_agent_pauses_its_caller_and_is_answered_through_it(
    servers: Any,
) -> None:
    """The MCP tool of a sub-agent asks: the sub-agent pauses, its caller's call waits with it
    (``awaiting_subagent``), the caller's pending lists the question with the sub-agent's session, and the
    answer given to the caller's session reaches the sub-agent's call, which goes on."""
    source = servers()
    store = MemoryStore()
    booker = Agent(
        ScriptedModel([[BOOK], [TextPart("booked it")]]), tools=[source], store=store, name="booker"
    )
    delegate = ToolCallPart(tool_call_id="d1", tool_name="booker", args={"task": "book Chez Toolwire"})
    caller = Agent(
        ScriptedModel([[delegate], [TextPart("all done")]]),
        tools=[booker.as_tool("booker", "Books tables.")],
        store=store,
    )
    paused = await caller.run("book me a table", session_id="main")
    [pending] = paused.pending
    assert paused.status == "paused" and pending.kind == "input" and pending.session_id != "main"
    assert (
        pending.question is not None
        and pending.question.message == "When, and for how many, at Chez Toolwire?"
    )
    [row] = await store.tool_calls("main")
    assert row.status == "awaiting_subagent"
    done = await caller.run(session_id="main", tool_outputs={pending.key: {"date": "today", "seats": 3}})
    assert done.status == "completed" and done.output == "all done"
    [sub_row] = await store.tool_calls(pending.session_id)
    assert (sub_row.status, said(sub_row.output)) == ("ok", "booked Chez Toolwire on today for 3")
