"""The one loop: invariants 1-4 and 6 of the design, pinned on the scripted model."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator
from typing import Any

import pytest

import toolwire.models as models_pkg
from toolwire import Agent, RunContext, TextPart, ToolCallPart, tool
from toolwire.errors import MaxStepsExceeded, ProviderHTTPError, SessionBusyError, StepAborted, StoreError
from toolwire.events import (
    InteractionEnd,
    ToolCallActive,
    ToolCallComplete,
    ToolInputAvailableEvent,
)
from toolwire.messages import Message, ToolResultPart, Usage
from toolwire.models.base import (
    Finish,
    Model,
    ModelRequest,
    ModelStreamPart,
    StreamStart,
    TextDelta,
    TextStart,
)
from toolwire.models.scripted import ScriptedModel
from toolwire.store import INTERRUPTED_OUTPUT, MemoryStore, SessionInfo, StepRecord, ToolCallRecord


def call(cid: str, name: str, **args: Any) -> ToolCallPart:
    return ToolCallPart(tool_call_id=cid, tool_name=name, args=args)


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: First addend.
        b: Second addend.
    """
    return a + b


# -- invariant 1: one primitive per model -------------------------------------------------------------


def test_model_contract_has_exactly_one_primitive() -> None:
    assert Model.__abstractmethods__ == frozenset({"stream"})
    public = {n for n, v in vars(Model).items() if not n.startswith("_") and callable(v)}
    assert public == {"stream", "aclose"}


@pytest.mark.parametrize("name", sorted(models_pkg._LAZY))
def test_no_adapter_has_a_second_generation_path(name: str) -> None:
    try:
        cls = getattr(models_pkg, name)
    except ImportError:
        pytest.fail(f"{name} cannot be imported")
    for attr, value in vars(cls).items():
        if attr.startswith("_") or not callable(value):
            continue
        assert attr in {"stream", "aclose", "from_file", "from_data"} or not inspect.iscoroutinefunction(
            value
        ), f"{name}.{attr} looks like a second request path"


# -- invariant 2: one loop --------------------------------------------------------------------------------


def _script() -> list[list[Any]]:
    return [
        [TextPart(text="Adding."), call("c1", "add", a=1, b=2)],
        [TextPart(text="The sum is 3.")],
    ]


async def test_run_consumes_the_same_loop_as_stream() -> None:
    streamed = Agent(ScriptedModel(_script()), tools=[add])
    events = [e async for e in streamed.stream("1+2?")]
    ran = Agent(ScriptedModel(_script()), tools=[add])
    seen: list[str] = []
    original = ran.stream

    def spying_stream(*args: Any, **kwargs: Any) -> Any:
        run = original(*args, **kwargs)
        seen.append("stream")
        return run

    ran.stream = spying_stream  # type: ignore[method-assign]
    result = await ran.run("1+2?")
    assert seen == ["stream"], "run() must go through stream()"
    assert result.output == "The sum is 3." == events[-1].output  # type: ignore[union-attr]
    assert [type(e).__name__ for e in events if not e.type.startswith("tool-call-heartbeat")][
        -1
    ] == "InteractionEnd"
    assert [m.role for m in result.messages] == ["user", "assistant", "tool", "assistant"]
    assert result.usage == Usage(input_tokens=20, output_tokens=10, requests=2)
    assert [x.result.output for x in result.tool_executions] == [3]


def test_run_sync_returns_the_result() -> None:
    agent = Agent(ScriptedModel(_script()), tools=[add])
    result = agent.run_sync("1+2?")
    assert result.output == "The sum is 3."
    assert result.tool_executions[0].finished_at >= result.tool_executions[0].started_at


# -- invariant 3: one hook, pending before execution ---------------------------------------------------------


async def test_tool_call_is_stored_pending_before_the_tool_runs_and_completed_after() -> None:
    store = MemoryStore()
    observed: dict[str, Any] = {}

    async def probe(ctx: RunContext[None]) -> str:
        """Look at the store while running."""
        rows = {r.tool_call_id: r for r in await store.tool_calls(ctx.session_id)}
        messages = await store.raw_messages(ctx.session_id)
        observed["status"] = rows["p1"].status
        observed["assistant_stored"] = any(m.role == "assistant" and m.tool_calls for m in messages)
        return "seen"

    agent = Agent(ScriptedModel([[call("p1", "probe")], [TextPart(text="done")]]), tools=[probe], store=store)
    result = await agent.run("go")
    assert observed == {"status": "pending", "assistant_stored": True}
    rows = await store.tool_calls(result.session_id)
    assert [(r.tool_call_id, r.status, r.output) for r in rows] == [("p1", "ok", "seen")]


async def test_every_step_is_persisted_so_a_new_agent_continues_with_tool_results() -> None:
    store = MemoryStore()
    signature = {"google": {"thoughtSignature": "c2lnbmF0dXJl"}}
    first = ScriptedModel(
        [
            [
                ToolCallPart(
                    tool_call_id="c1", tool_name="add", args={"a": 2, "b": 2}, provider_metadata=signature
                )
            ],
            [TextPart(text="4")],
        ]
    )
    result = await Agent(first, tools=[add], store=store).run("2+2?")
    second = ScriptedModel([[TextPart(text="It was 4.")]])
    await Agent(second, tools=[add], store=store).run("what was it?", session_id=result.session_id)
    sent = second.requests[0].messages
    assert [m.role for m in sent] == ["user", "assistant", "tool", "assistant", "user"]
    assert sent[1].tool_calls[0].provider_metadata == signature
    assert sent[2].tool_results[0] == ToolResultPart(tool_call_id="c1", tool_name="add", output=4)


# -- invariant 4: valid history -------------------------------------------------------------------------------


async def test_pending_call_left_by_a_crash_gets_an_interrupted_result_in_order() -> None:
    store = MemoryStore()
    await store.ensure_session(SessionInfo(id="s"))
    await store.append_message("s", Message.user("hi", session_id="s"), interaction_id="i")
    assistant = Message(role="assistant", parts=(call("a", "add", a=1, b=1), call("b", "add", a=2, b=2)))
    await store.begin_step(
        StepRecord(
            session_id="s",
            interaction_id="i",
            step=1,
            message=assistant,
            tool_calls=tuple(
                ToolCallRecord(
                    session_id="s",
                    tool_call_id=c.tool_call_id,
                    tool_name="add",
                    message_id=assistant.id,
                    step=1,
                )
                for c in assistant.tool_calls
            ),
        )
    )
    # call "b" finished before the crash, "a" did not
    await store.complete_tool_call(
        "s", "b", status="ok", output=4, is_error=False, started_at=1.0, finished_at=2.0
    )
    model = ScriptedModel([[TextPart(text="recovered")]])
    await Agent(model, tools=[add], store=store).run("continue", session_id="s")
    sent = model.requests[0].messages
    assert [m.role for m in sent] == ["user", "assistant", "tool", "user"]
    results = sent[2].tool_results
    assert [(r.tool_call_id, r.output, r.is_error) for r in results] == [
        ("a", INTERRUPTED_OUTPUT, True),
        ("b", 4, False),
    ]
    statuses = {r.tool_call_id: r.status for r in await store.tool_calls("s")}
    assert statuses == {"a": "interrupted", "b": "ok"}


async def test_parallel_results_keep_call_order_even_when_they_finish_out_of_order() -> None:
    async def slow(delay: float, label: str) -> str:
        """Sleep then answer."""
        await asyncio.sleep(delay)
        return label

    model = ScriptedModel(
        [
            [call("first", "slow", delay=0.2, label="one"), call("second", "slow", delay=0.0, label="two")],
            [TextPart(text="ok")],
        ]
    )
    agent = Agent(model, tools=[slow])
    events = [e async for e in agent.stream("go")]
    completes = [e.tool_call_id for e in events if isinstance(e, ToolCallComplete)]
    assert completes == ["second", "first"]  # live events in completion order
    tool_message = model.requests[1].messages[-1]
    assert [r.tool_call_id for r in tool_message.tool_results] == ["first", "second"]  # history in call order


# -- invariant 6: session-addressed events ----------------------------------------------------------------------


async def test_every_event_carries_the_envelope_with_monotonic_seq_per_session() -> None:
    child_model = ScriptedModel([[call("c1", "add", a=5, b=5)], [TextPart(text="ten")]])
    child = Agent(child_model, tools=[add], name="math")
    parent_model = ScriptedModel(
        [
            [call("c1", "math", task="5+5")],
            [TextPart(text="ten, says math")],
        ]  # same tool_call_id as the child's
    )
    parent = Agent(parent_model, tools=[child.as_tool("math", "Ask the math agent.")])
    events = [e async for e in parent.stream("compute")]
    sessions = {e.session_id for e in events}
    assert len(sessions) == 2
    root = events[0].session_id
    (child_session,) = sessions - {root}
    for event in events:
        assert event.user_session_id == root
        assert event.interaction_id
        if event.session_id == child_session:
            assert event.parent_session_id == root
        else:
            assert event.parent_session_id is None
    for sid in sessions:
        seqs = [e.seq for e in events if e.session_id == sid]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    # the same tool_call_id lives in both sessions; (session_id, tool_call_id) tells them apart
    completes = {(e.session_id, e.tool_call_id): e for e in events if isinstance(e, ToolCallComplete)}
    assert completes[(child_session, "c1")].output == 10
    assert completes[(root, "c1")].output == "ten"
    # child events arrive between the parent's tool-call-active and tool-call-complete
    idx_active = next(
        i for i, e in enumerate(events) if isinstance(e, ToolCallActive) and e.session_id == root
    )
    idx_done = next(
        i for i, e in enumerate(events) if isinstance(e, ToolCallComplete) and e.session_id == root
    )
    assert all(idx_active < i < idx_done for i, e in enumerate(events) if e.session_id == child_session)


async def test_seq_continues_across_runs_of_a_session() -> None:
    agent = Agent(ScriptedModel([[TextPart(text="a")], [TextPart(text="b")]]))
    first = [e async for e in agent.stream("1")]
    second = [e async for e in agent.stream("2", session_id=first[0].session_id)]
    assert second[0].seq > first[-1].seq


# -- errors, retries, limits -------------------------------------------------------------------------------------------


class FlakyModel(Model):
    """Fails with a given error on the first ``failures`` requests, optionally after emitting some text."""

    provider = "flaky"
    model_name = "flaky"

    def __init__(self, failures: int, *, partial: bool, status: int = 503) -> None:
        self.failures = failures
        self.partial = partial
        self.status = status
        self.calls = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamPart]:
        self.calls += 1
        yield StreamStart()
        if self.calls <= self.failures:
            if self.partial:
                yield TextStart(id="t")
                yield TextDelta(id="t", delta="half a sen")
            raise ProviderHTTPError(
                "overloaded",
                provider="flaky",
                status=self.status,
                retryable=self.status >= 500,
                retry_after=0.01,
            )
        yield TextStart(id="t")
        yield TextDelta(id="t", delta="fine")
        yield Finish(reason="stop", usage=Usage(input_tokens=1, output_tokens=1, requests=1))


async def test_retryable_error_before_any_output_is_retried() -> None:
    model = FlakyModel(2, partial=False)
    result = await Agent(model, retries=2).run("hi")
    assert (model.calls, result.output) == (3, "fine")


async def test_non_retryable_error_reaches_the_caller_typed_and_nothing_half_written_is_stored() -> None:
    store = MemoryStore()
    agent = Agent(FlakyModel(1, partial=False, status=400), store=store)
    with pytest.raises(ProviderHTTPError) as info:
        await agent.run("hi", session_id="s")
    assert info.value.status == 400
    assert [m.role for m in await store.raw_messages("s")] == ["user"]


async def test_error_after_partial_output_aborts_the_step_cleanly() -> None:
    store = MemoryStore()
    events: list[Any] = []
    agent = Agent(FlakyModel(1, partial=True), store=store)
    with pytest.raises(StepAborted):
        async for event in agent.stream("hi", session_id="s"):
            events.append(event)
    assert [e.type for e in events][-2:] == ["error", "interaction-end"]
    assert events[-1].status == "error"
    assert [m.role for m in await store.raw_messages("s")] == ["user"]  # no half-written assistant message
    # the session still works
    result = await agent.run("again", session_id="s")
    assert result.output == "fine"


async def test_max_steps_raises_after_storing_a_valid_history() -> None:
    store = MemoryStore()
    model = ScriptedModel([[call("x", "add", a=1, b=1)]], repeat_last=True)
    with pytest.raises(MaxStepsExceeded):
        await Agent(model, tools=[add], max_steps=3, store=store).run("loop", session_id="s")
    history = await store.load_history("s")
    assert [m.role for m in history] == ["user"] + ["assistant", "tool"] * 3


async def test_concurrent_runs_on_the_same_session_are_rejected() -> None:
    gate = asyncio.Event()

    async def wait() -> str:
        """Wait for the gate."""
        await gate.wait()
        return "ok"

    store = MemoryStore()
    agent = Agent(ScriptedModel([[call("w", "wait")], [TextPart(text="done")]]), tools=[wait], store=store)
    first = asyncio.create_task(agent.run("one", session_id="s"))
    await asyncio.sleep(0.05)
    with pytest.raises(SessionBusyError):
        await agent.run("two", session_id="s")
    gate.set()
    assert (await first).output == "done"


async def test_closing_the_stream_mid_tool_cancels_the_tool_and_stores_it_cancelled() -> None:
    started = asyncio.Event()
    cancelled = asyncio.Event()

    async def hang() -> str:
        """Hang until cancelled."""
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    store = MemoryStore()
    agent = Agent(ScriptedModel([[call("h", "hang")], [TextPart(text="after")]]), tools=[hang], store=store)
    run = agent.stream("go", session_id="s")
    async for event in run:
        if isinstance(event, ToolCallActive):
            break
    await run.aclose()
    assert started.is_set() and cancelled.is_set()
    assert {r.tool_call_id: r.status for r in await store.tool_calls("s")} == {"h": "cancelled"}
    history = await store.load_history("s")
    assert [m.role for m in history] == ["user", "assistant", "tool"]
    assert history[-1].tool_results[0].is_error
    # and the next turn works on the same session
    assert (await agent.run("next", session_id="s")).output == "after"


async def test_closing_the_stream_keeps_the_results_of_calls_that_had_already_finished() -> None:
    async def quick(i: int) -> str:
        """Finishes at once."""
        return f"done {i}"

    store = MemoryStore()
    calls = [call(f"q{i}", "quick", i=i) for i in range(3)]
    agent = Agent(ScriptedModel([calls, [TextPart(text="after")]]), tools=[quick], store=store)
    run = agent.stream("go", session_id="s")
    async for event in run:
        if isinstance(event, ToolCallActive):  # the three calls ran already; none was announced
            break
    await run.aclose()
    rows = {r.tool_call_id: (r.status, r.output) for r in await store.tool_calls("s")}
    assert rows == {f"q{i}": ("ok", f"done {i}") for i in range(3)}
    # announced with the run's end, as they ended
    ended = [e for e in run.unpublished_end if isinstance(e, ToolCallComplete)]
    assert [(e.tool_call_id, e.status, e.output) for e in ended] == [
        (f"q{i}", "ok", f"done {i}") for i in range(3)
    ]
    history = await store.load_history("s")
    assert [p.output for p in history[-1].tool_results] == [f"done {i}" for i in range(3)]


async def test_echoed_tool_arguments_are_dropped_from_assistant_text() -> None:
    model = ScriptedModel(
        [
            [TextPart(text='{"a": 1, "b": 2}'), call("c", "add", a=1, b=2)],
            [TextPart(text='{"looks": "like json"} but is an answer')],
        ]
    )
    agent = Agent(model, tools=[add])
    result = await agent.run("sum")
    assert result.messages[1].text == ""
    assert result.output == '{"looks": "like json"} but is an answer'


async def test_tool_input_available_carries_provider_metadata_and_title() -> None:
    part = ToolCallPart(
        tool_call_id="c",
        tool_name="add",
        args={"a": 1, "b": 1},
        provider_metadata={"google": {"thoughtSignature": "s"}},
        title="Adding",
    )
    agent = Agent(ScriptedModel([[part], [TextPart(text="2")]]), tools=[add])
    events = [e async for e in agent.stream("x")]
    available = next(e for e in events if isinstance(e, ToolInputAvailableEvent))
    assert (available.provider_metadata, available.title) == ({"google": {"thoughtSignature": "s"}}, "Adding")
    assert isinstance(events[-1], InteractionEnd) and events[-1].status == "completed"


@tool(sequential=True)
async def ordered(label: str) -> str:
    """Record the order."""
    ORDER.append(f"start {label}")
    await asyncio.sleep(0.01)
    ORDER.append(f"end {label}")
    return label


ORDER: list[str] = []


async def test_a_sequential_tool_makes_the_step_run_calls_one_after_another() -> None:
    ORDER.clear()
    model = ScriptedModel(
        [[call("1", "ordered", label="a"), call("2", "ordered", label="b")], [TextPart(text="k")]]
    )
    await Agent(model, tools=[ordered]).run("go")
    assert ORDER == ["start a", "end a", "start b", "end b"]


async def test_override_returns_a_configured_copy_and_leaves_the_agent_alone() -> None:
    """What the CLI does with a user's agent and ``--model``/``--store``: the caller's object is untouched."""
    from toolwire.agent.drivers import NativeToolDriver
    from toolwire.agent.drivers.react import ReActDriver
    from toolwire.store.memory import MemoryStore

    class TextOnlyModel(ScriptedModel):
        supports_tools = False  # like the embedded local model: driven through ReAct

    original_model = ScriptedModel([[TextPart(text="from the original")]])
    agent = Agent(original_model)
    store = MemoryStore()
    tool_less = TextOnlyModel([[TextPart(text="unused")]])
    twin = agent.override(model=tool_less, store=store)
    assert agent.model is original_model and isinstance(agent.driver, NativeToolDriver)
    assert twin.model is tool_less and isinstance(twin.driver, ReActDriver)
    assert await twin.get_store() is store
    assert await agent.get_store() is not store
    result = await agent.run("hi")
    assert result.output == "from the original"
    assert await store.list_sessions() == []


async def test_a_step_end_that_could_not_be_written_leaves_no_seq_gap() -> None:
    # The step's last events are numbered before the write that counts them and published after it. When
    # that write fails (PostgreSQL restarting: seen in tests/scaleout/test_chaos.py), they are never
    # published; their seqs were skipped, and every client saw a gap that no stream-reset explains.
    class StepEndFailsOnce(MemoryStore):
        failed = False

        async def finish_step(self, session_id: str, **kwargs: Any) -> None:
            if kwargs.get("completed") and not self.failed:
                self.failed = True
                raise StoreError("the database system is starting up")
            await super().finish_step(session_id, **kwargs)

    def one() -> str:
        """One call."""
        return "done"

    store = StepEndFailsOnce()
    calls = [ToolCallPart(tool_call_id="c1", tool_name="one", args={})]
    agent = Agent(ScriptedModel([calls, [TextPart(text="ok")]]), tools=[one], store=store)
    seqs: list[int] = []
    types: list[str] = []
    with pytest.raises(StoreError):
        async with agent.stream("go", session_id="gap") as run:
            async for event in run:
                seqs.append(event.seq)
                types.append(event.type)
    assert store.failed
    assert seqs == list(range(1, len(seqs) + 1)), list(zip(seqs, types, strict=True))
    assert types[-2:] == ["error", "interaction-end"]
    assert types.count("tool-call-complete") == 1  # the finished call is still announced, once
    # The next run numbers after what was published.
    next_run = agent.stream("again", session_id="gap")
    after = [event async for event in next_run]
    assert after[0].seq == seqs[-1] + 1
