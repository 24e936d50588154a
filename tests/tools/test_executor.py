"""Tools and the executor: schemas, validation, context, interceptors, timeouts, error modes, tool events."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from toolwire import Agent, RunContext, TextPart, ToolCallPart, tool
from toolwire.errors import ConfigError, ToolExecutionError
from toolwire.events import (
    CustomDataEvent,
    InteractionEnd,
    MediaEvent,
    SessionRenamed,
    SystemMessageEvent,
    ToolCallComplete,
    ToolCallHeartbeat,
    ToolProgress,
)
from toolwire.messages import ToolResultPart
from toolwire.models.scripted import ScriptedModel
from toolwire.store import MemoryStore
from toolwire.tools import Allow, Block, RewriteArgs, ToolInterceptor
from toolwire.tools.function import function_tool


class Address(BaseModel):
    city: str
    zip: str | None = None


def ship(item_id: int, address: Address, speed: Literal["slow", "fast"] = "slow") -> dict[str, Any]:
    """Ship an item.

    Args:
        item_id: The item to ship.
        address: Where to ship it.
        speed: How fast.
    """
    return {"item": item_id, "to": address.city, "speed": speed}


def call(cid: str, name: str, args: dict[str, Any] | None = None, raw: str = "") -> ToolCallPart:
    return ToolCallPart(tool_call_id=cid, tool_name=name, args=args or {}, args_json=raw)


async def run_calls(
    tools: list[Any], calls: list[ToolCallPart], **agent_kwargs: Any
) -> tuple[Any, list[Any]]:
    model = ScriptedModel([calls, [TextPart(text="done")]])
    agent = Agent(model, tools=tools, **agent_kwargs)
    events = [e async for e in agent.stream("go")]
    return model, events


def results_sent(model: ScriptedModel) -> list[ToolResultPart]:
    return model.requests[1].messages[-1].tool_results


# -- schema ------------------------------------------------------------------------------------------------


def test_schema_comes_from_type_hints_and_docstring() -> None:
    t = function_tool(ship)
    assert t.description == "Ship an item."
    schema = t.parameters
    assert schema["required"] == ["item_id", "address"]
    assert schema["properties"]["item_id"] == {"type": "integer", "description": "The item to ship."}
    assert schema["properties"]["speed"]["enum"] == ["slow", "fast"]
    assert schema["properties"]["speed"]["default"] == "slow"
    assert schema["additionalProperties"] is False
    assert "Address" in schema["$defs"]


def test_context_parameter_is_not_in_the_schema() -> None:
    @tool
    async def whoami(ctx: RunContext[None], loud: bool = False) -> str:
        """Say the session id."""
        return ctx.session_id

    assert set(whoami.parameters["properties"]) == {"loud"}
    assert whoami.context_param == "ctx"


def test_bad_tool_definitions_raise_config_errors() -> None:
    def star(*args: int) -> None:
        """No."""

    with pytest.raises(ConfigError):
        function_tool(star)
    with pytest.raises(ConfigError):
        function_tool(ship, name="has space")


# -- execution --------------------------------------------------------------------------------------------


async def test_validation_error_becomes_an_error_result_with_the_reason() -> None:
    model, _ = await run_calls(
        [ship], [call("1", "ship", {"item_id": "not a number", "address": {"city": "Oslo"}})]
    )
    (result,) = results_sent(model)
    assert result.is_error
    assert "item_id" in result.output and "integer" in result.output


async def test_valid_arguments_are_coerced_into_models() -> None:
    model, _ = await run_calls(
        [ship], [call("1", "ship", {"item_id": 7, "address": {"city": "Oslo"}, "speed": "fast"})]
    )
    assert results_sent(model)[0].output == {"item": 7, "to": "Oslo", "speed": "fast"}


async def test_unknown_tool_and_unparseable_arguments_give_error_results() -> None:
    model, _ = await run_calls([ship], [call("1", "nope", {}), call("2", "ship", raw='{"item_id": 1, "addr')])
    unknown, broken = results_sent(model)
    assert unknown.is_error and "unknown tool 'nope'" in unknown.output and "ship" in unknown.output
    assert broken.is_error and "not valid JSON" in broken.output


async def test_raising_tool_becomes_error_result_by_default_and_raises_when_asked() -> None:
    def explode() -> None:
        """Fail."""
        raise ValueError("kaput")

    model, _ = await run_calls([explode], [call("1", "explode")])
    assert results_sent(model)[0].output == "explode failed: ValueError: kaput"
    store = MemoryStore()
    agent = Agent(
        ScriptedModel([[call("1", "explode")], [TextPart(text="x")]]),
        tools=[explode],
        raise_on_failure=True,
        store=store,
    )
    with pytest.raises(ToolExecutionError) as info:
        await agent.run("go", session_id="s")
    assert isinstance(info.value.__cause__, ValueError)
    history = await store.load_history("s")  # the failure was recorded before raising: history stays valid
    assert [m.role for m in history] == ["user", "assistant", "tool"]


async def test_timeout_cancels_the_tool_and_reports_it() -> None:
    cancelled = asyncio.Event()

    @tool(timeout=0.05)
    async def sleepy() -> str:
        """Sleep too long."""
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "late"

    model, events = await run_calls([sleepy], [call("1", "sleepy")])
    (result,) = results_sent(model)
    assert result.is_error and "timed out after 0.05s" in result.output
    assert cancelled.is_set()
    complete = next(e for e in events if isinstance(e, ToolCallComplete))
    assert complete.status == "error"


async def test_non_serialisable_output_is_an_error_result_that_keeps_the_repr() -> None:
    class Opaque:
        def __repr__(self) -> str:
            return "<Opaque 42>"

    def weird() -> object:
        """Return something odd."""
        return {"x": Opaque()}

    model, _ = await run_calls([weird], [call("1", "weird")])
    (result,) = results_sent(model)
    assert result.is_error and "not JSON-serialisable" in result.output["error"]
    assert "<Opaque 42>" in result.output["repr"]


async def test_huge_output_is_truncated_for_the_model_but_kept_whole_in_the_store() -> None:
    def big() -> str:
        """Return a lot."""
        return "x" * 50_000

    store = MemoryStore()
    model = ScriptedModel([[call("1", "big")], [TextPart(text="k")]])
    result = await Agent(model, tools=[big], max_tool_output_chars=1000, store=store).run("go")
    shown = results_sent(model)[0].output
    assert shown.startswith("x" * 1000) and "output truncated: showing 1,000 of 50,000 characters" in shown
    (row,) = await store.tool_calls(result.session_id)
    assert row.output == "x" * 50_000


async def test_sync_tools_run_in_a_thread_and_calls_run_concurrently() -> None:
    def blocking(label: str) -> dict[str, float]:
        """Block a little."""
        start = time.monotonic()
        time.sleep(0.2)
        return {"start": start, "end": time.monotonic()}

    model, _ = await run_calls(
        [blocking], [call("a", "blocking", {"label": "a"}), call("b", "blocking", {"label": "b"})]
    )
    a, b = (r.output for r in results_sent(model))
    assert a["start"] < b["end"] and b["start"] < a["end"], "the two calls should overlap"


# -- interceptors -----------------------------------------------------------------------------------------------


class Policy(ToolInterceptor):
    async def before_call(self, call: ToolCallPart, ctx: RunContext[Any]) -> Any:
        if call.tool_name == "delete":
            return Block("deleting is not allowed")
        if call.tool_name == "echo" and call.args.get("text") == "rewrite me":
            return RewriteArgs({"text": "rewritten"})
        return Allow()

    async def after_call(
        self, call: ToolCallPart, result: ToolResultPart, ctx: RunContext[Any]
    ) -> ToolResultPart | None:
        if call.tool_name == "echo":
            return ToolResultPart(
                tool_call_id=result.tool_call_id, tool_name=result.tool_name, output=f"[{result.output}]"
            )
        return None


def echo(text: str) -> str:
    """Echo text."""
    return text


def delete(path: str) -> str:
    """Delete a file."""
    raise AssertionError("must never run")


async def test_interceptors_block_rewrite_args_and_rewrite_results() -> None:
    model, events = await run_calls(
        [echo, delete],
        [call("1", "echo", {"text": "rewrite me"}), call("2", "delete", {"path": "/"})],
        interceptors=[Policy()],
    )
    echoed, blocked = results_sent(model)
    assert echoed.output == "[rewritten]" and not echoed.is_error
    assert blocked.is_error and blocked.output == "blocked: deleting is not allowed"
    statuses = {e.tool_call_id: e.status for e in events if isinstance(e, ToolCallComplete)}
    assert statuses == {"1": "ok", "2": "blocked"}


def blocking_agent(store: MemoryStore) -> tuple[Agent[None, str], ScriptedModel]:
    model = ScriptedModel(
        [[call("1", "echo", {"text": "kept"}), call("2", "delete", {"path": "/"})], [TextPart(text="x")]]
    )
    agent = Agent(model, tools=[echo, delete], interceptors=[Policy()], stop_on_block=True, store=store)
    return agent, model


async def test_stop_on_block_ends_the_run_blocked_with_the_steps_calls_run_and_stored() -> None:
    """The blocked call's step still runs its other calls; the run ends ``blocked`` (no second model
    request, no exception) and its result lists the step's calls, their results stored."""
    store = MemoryStore()
    agent, model = blocking_agent(store)
    result = await agent.run("go", session_id="s")
    assert result.status == "blocked" and result.output == ""
    assert {e.call.tool_call_id: e.status for e in result.tool_executions} == {"1": "ok", "2": "blocked"}
    assert [e.call.tool_call_id for e in result.blocked] == ["2"]
    assert len(model.requests) == 1  # nothing asked of the model after the blocked step
    assert {r.tool_call_id: r.status for r in await store.tool_calls("s")} == {"1": "ok", "2": "blocked"}
    history = await store.load_history("s")
    outputs = [r.output for m in history for r in m.tool_results]
    assert outputs == ["[kept]", "blocked: deleting is not allowed"]

    agent, _ = blocking_agent(MemoryStore())
    events = [e async for e in agent.stream("go")]
    end = events[-1]
    assert isinstance(end, InteractionEnd) and (end.status, end.error) == ("blocked", None)


async def test_raise_on_failure_still_raises_after_recording() -> None:
    store = MemoryStore()
    agent = Agent(
        ScriptedModel([[call("1", "boom", {})], [TextPart(text="x")]]),
        tools=[boom],
        raise_on_failure=True,
        store=store,
    )
    with pytest.raises(ToolExecutionError, match="kaput"):
        await agent.run("go", session_id="s")
    assert [r.status for r in await store.tool_calls("s")] == ["error"]


def boom() -> str:
    """Fail."""
    raise RuntimeError("kaput")


# -- tool events ---------------------------------------------------------------------------------------------------


async def test_tools_speak_in_the_event_stream_with_their_ids() -> None:
    @tool
    async def work(ctx: RunContext[None]) -> str:
        """Do visible work."""
        ctx.progress(0.5, "halfway")
        ctx.system_message("careful", level="warning")
        ctx.media("image/png", data=b"\x89PNG")
        ctx.data("rows", [1, 2])
        await asyncio.sleep(0.12)
        return "ok"

    _, events = await run_calls([work], [call("w1", "work")], heartbeat_interval=0.03)
    root = events[0].session_id
    kinds = [ToolProgress, SystemMessageEvent, MediaEvent, CustomDataEvent]
    found = [next(e for e in events if isinstance(e, kind)) for kind in kinds]
    for event in found:
        assert event.tool_call_id == "w1" and event.session_id == root and event.interaction_id
    assert found[0].fraction == 0.5 and found[1].level == "warning" and found[2].data == "iVBORw=="
    assert found[3].data == [1, 2]
    heartbeats = [e for e in events if isinstance(e, ToolCallHeartbeat)]
    assert heartbeats and all(h.tool_call_id == "w1" for h in heartbeats)
    assert heartbeats[-1].elapsed > heartbeats[0].elapsed


async def test_enabled_and_excluded_tools_limit_what_the_model_sees_and_can_run() -> None:
    model = ScriptedModel([[call("1", "delete", {"path": "x"})], [TextPart(text="k")]])
    agent = Agent(model, tools=[echo, delete])
    await agent.run("go", exclude_tools=["delete"])
    assert [t.name for t in model.requests[0].tools] == ["echo"]
    assert results_sent(model)[0].is_error
    with pytest.raises(ConfigError):
        await agent.run("go", enabled_tools=["missing"])


async def test_a_tool_renames_its_session_stored_before_everyone_hears_of_it() -> None:
    @tool
    async def rename(ctx: RunContext[None], title: str) -> str:
        """Rename the chat."""
        return await ctx.rename(title)

    store = MemoryStore()
    calls = [call("1", "rename", {"title": " Trip\n plan "}), call("2", "rename", {"title": " \t"})]
    agent = Agent(ScriptedModel([calls, [TextPart(text="ok")]]), tools=[rename], store=store)
    events = [e async for e in agent.stream("go", session_id="s")]
    [renamed] = [e for e in events if isinstance(e, SessionRenamed)]
    assert (renamed.title, renamed.tool_call_id, renamed.session_id) == ("Trip plan", "1", "s")
    info = await store.get_session("s")
    assert info is not None and info.title == "Trip plan"
    blank = next(e for e in events if isinstance(e, ToolCallComplete) and e.tool_call_id == "2")
    assert blank.is_error and "non-empty" in str(blank.output)
