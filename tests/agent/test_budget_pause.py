"""A usage limit that pauses the run for a person to extend it (issue 26 item 5, ``UsageLimits(pause=True)``):
durable (a row of its own, read back by another process), answered like an approval, never sent to a model."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.reliability.wire_checks import adapters, unanswered_calls
from toolwire import Agent, TextPart, ToolCallPart, UsageLimits, open_store
from toolwire.errors import ProviderError, ResumeError, UsageLimitExceeded
from toolwire.events import ToolCallAwaiting, ToolCallResolved
from toolwire.messages import Part, Usage
from toolwire.models.base import ModelRequest
from toolwire.models.scripted import ScriptedModel
from toolwire.store import MemoryStore, Store
from toolwire.store.records import USAGE_LIMIT_TOOL
from toolwire.tools.pending import Denied


def lookup(key: str) -> str:
    """Look a key up."""
    return key.upper()


def five_lookups(request: ModelRequest) -> Sequence[Part]:
    """A model that looks up k0..k4, one per step, then answers with what it found."""
    n = sum(1 for m in request.messages if m.role == "assistant")
    if n < 5:
        return [ToolCallPart(tool_call_id=f"c{n}", tool_name="lookup", args={"key": f"k{n}"})]
    return [TextPart(text=f"found {n} keys")]


def agent_with(model: ScriptedModel, store: Store, limits: UsageLimits) -> Agent[None]:
    return Agent(model, tools=[lookup], store=store, usage_limits=limits, max_steps=20)


async def test_a_pausing_limit_pauses_before_the_request_and_an_approval_goes_on() -> None:
    model = ScriptedModel(five_lookups)
    store = MemoryStore()
    agent = agent_with(model, store, UsageLimits(requests=3, pause=True))
    run = agent.stream("go", session_id="s")
    events = [e async for e in run]
    result = run.result
    assert result is not None and result.status == "paused" and len(model.requests) == 3
    [pending] = result.pending
    assert (pending.kind, pending.tool_name) == ("approval", USAGE_LIMIT_TOOL)
    assert pending.args["limit"] == "requests" and pending.args["allowed"] == 3
    assert pending.args["would_be"] == 4 and pending.args["per"] == "run"
    [awaiting] = [e for e in events if isinstance(e, ToolCallAwaiting)]
    assert (awaiting.tool_call_id, awaiting.tool_name) == (pending.tool_call_id, USAGE_LIMIT_TOOL)
    assert await agent.pending("s") == [pending]  # durable: read back from the store
    history = await store.load_history("s")
    assert all(c.tool_name != USAGE_LIMIT_TOOL for m in history for c in m.tool_calls)
    sent: list[object] = []
    with pytest.raises(ProviderError):  # the held session is valid to send as it is
        async for _ in adapters(sent)["anthropic"]().stream(ModelRequest(messages=tuple(history))):
            pass
    assert unanswered_calls("anthropic", sent[0]) == []  # type: ignore[arg-type]

    run = agent.stream(session_id="s", approvals={pending.tool_call_id: True})
    resumed = [e async for e in run]
    result = run.result
    assert result is not None and result.status == "completed" and result.output == "found 5 keys"
    assert len(model.requests) == 6  # three more: the run's limit counts from the answering run
    [resolved] = [e for e in resumed if isinstance(e, ToolCallResolved)]
    assert (resolved.tool_call_id, resolved.resolution) == (pending.tool_call_id, "approved")
    rows = [r for r in await store.tool_calls("s") if r.tool_name == USAGE_LIMIT_TOOL]
    assert [(r.status, r.output) for r in rows] == [("ok", "extended")]
    assert await agent.pending("s") == []


async def test_a_denial_ends_the_run_with_the_limit_and_a_new_prompt_closes_the_hold() -> None:
    model = ScriptedModel(five_lookups)
    store = MemoryStore()
    agent = agent_with(model, store, UsageLimits(requests=2, pause=True))
    [pending] = (await agent.run("go", session_id="s")).pending
    with pytest.raises(UsageLimitExceeded, match="did not extend it") as raised:
        await agent.run(session_id="s", approvals={pending.tool_call_id: Denied("too expensive")})
    assert raised.value.limit == "requests" and len(model.requests) == 2
    [row] = [r for r in await store.tool_calls("s") if r.tool_name == USAGE_LIMIT_TOOL]
    assert (row.status, row.output) == ("denied", "too expensive")

    [again] = (await agent.run("go on", session_id="t")).pending
    result = await agent.run("something else", session_id="t")
    assert result.status == "paused"  # the new turn's run has its own two requests, then holds again
    statuses = [r.status for r in await store.tool_calls("t") if r.tool_name == USAGE_LIMIT_TOOL]
    assert statuses == ["unanswered", "awaiting_approval"]
    assert again.tool_call_id not in {p.tool_call_id for p in result.pending}


async def test_answers_to_a_held_run_are_checked_before_anything_runs() -> None:
    model = ScriptedModel(five_lookups)
    agent = agent_with(model, MemoryStore(), UsageLimits(requests=1, pause=True))
    [pending] = (await agent.run("go", session_id="s")).pending
    with pytest.raises(ResumeError, match="awaits approval"):
        await agent.run(session_id="s", tool_outputs={pending.tool_call_id: "yes"})
    with pytest.raises(ResumeError, match="not awaiting"):
        await agent.run(session_id="s", approvals={"other": True})
    with pytest.raises(ResumeError, match="nothing to run"):
        await agent.run(session_id="s")
    await agent.check_answers("s", approvals={pending.tool_call_id: True})  # the server's pre-check agrees
    assert len(model.requests) == 1
    assert (await agent.run(session_id="s", approvals={pending.tool_call_id: True})).status == "paused"


async def test_each_extension_grows_a_session_limit_by_its_size_in_any_process(tmp_path: Path) -> None:
    """Per session, 2 requests; each approval grants 2 more, counted from the stored extensions by a
    process that never saw the earlier ones."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'held.db'}"
    usage = Usage(input_tokens=10, output_tokens=5, requests=1)
    per_session = UsageLimits(requests=2, per="session", pause=True)
    first = await open_store(url)
    model = ScriptedModel(five_lookups, usage_per_turn=usage)
    [pending] = (await agent_with(model, first, per_session).run("go", session_id="s")).pending
    assert len(model.requests) == 2
    await first.close()
    for extension in (1, 2):
        store = await open_store(url)  # another process: only the store is shared
        model = ScriptedModel(five_lookups, usage_per_turn=usage)
        result = await agent_with(model, store, per_session).run(
            session_id="s", approvals={pending.tool_call_id: True}
        )
        assert len(model.requests) == 2, extension  # 2 more each time: 2 x (1 + extensions) in all
        if extension == 1:
            [pending] = result.pending
            assert pending.args["allowed"] == 4
        else:
            assert result.status == "completed" and result.output == "found 5 keys"
        await store.close()


async def test_calls_past_a_pausing_tool_calls_limit_wait_for_approval_and_run_once_approved() -> None:
    ran: list[str] = []

    def note(key: str) -> str:
        """Note a key."""
        ran.append(key)
        return "ok"

    calls = [ToolCallPart(tool_call_id=f"c{i}", tool_name="note", args={"key": str(i)}) for i in range(3)]
    store = MemoryStore()
    agent = Agent(
        ScriptedModel([calls, [TextPart(text="done")]]),
        tools=[note],
        store=store,
        usage_limits=UsageLimits(tool_calls=2, pause=True),
    )
    run = agent.stream("go", session_id="s")
    events = [e async for e in run]
    result = run.result
    assert result is not None and result.status == "paused" and ran == []
    assert [(p.tool_call_id, p.kind) for p in result.pending] == [
        ("c0", "approval"),
        ("c1", "approval"),
        ("c2", "approval"),
    ]
    awaiting = [e for e in events if isinstance(e, ToolCallAwaiting)]
    assert all(e.reason is not None and "tool_calls limit (2)" in e.reason for e in awaiting)
    assert all(p.reason is not None for p in await agent.pending("s"))  # the reason is stored too
    result = await agent.run(session_id="s", approvals={"c0": True, "c1": True, "c2": Denied("enough")})
    assert result.status == "completed" and ran == ["0", "1"]
    assert {r.tool_call_id: r.status for r in await store.tool_calls("s")} == {
        "c0": "ok",
        "c1": "ok",
        "c2": "denied",
    }
