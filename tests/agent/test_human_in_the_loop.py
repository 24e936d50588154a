"""Human in the loop: approvals, client tools, pausing and resuming a run through the one loop.

Every case runs the real loop, executor and store on the scripted model; the continuation request a
resumed run sends is compared field by field with the one an uninterrupted run sends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from toolwire import Agent, RunContext, TextPart, ToolCallPart, tool
from toolwire.agent import _pause
from toolwire.errors import ConfigError, ResumeError
from toolwire.events import (
    AgentEvent,
    InteractionEnd,
    ToolCallAwaiting,
    ToolCallComplete,
    ToolCallResolved,
)
from toolwire.messages import Part
from toolwire.models.base import ModelRequest
from toolwire.models.scripted import ScriptedModel
from toolwire.store import UNANSWERED_OUTPUT, MemoryStore, open_store
from toolwire.store.base import Store
from toolwire.tools.pending import Denied, PendingCall, ToolFailed
from toolwire.tools.registry import Toolset

SIG = {"google": {"thoughtSignature": "c2lnLW9mLXJlZnVuZA=="}}
RAN: list[str] = []


def lookup(order: str) -> str:
    """Look an order up."""
    RAN.append(f"lookup {order}")
    return f"order {order}: shipped"


def refund_body(order: str, amount: int = 10) -> str:
    """Refund an order."""
    RAN.append(f"refund {order}")
    return f"refunded {amount} EUR on {order}"


refund = tool(refund_body, name="refund", requires_approval=True)
free_refund = tool(refund_body, name="refund")  # the same tool, no approval: the uninterrupted twin


@tool(external=True)
def pick_colour(question: str) -> str:
    """Ask the user to pick a gift wrap colour in the page.

    Args:
        question: What to ask.
    """
    raise AssertionError("an external tool never runs on the server")


def client_twin(question: str) -> str:
    """Ask the user to pick a gift wrap colour in the page.

    Args:
        question: What to ask.
    """
    return "blue"


def call(cid: str, name: str, metadata: dict[str, Any] | None = None, **args: Any) -> ToolCallPart:
    return ToolCallPart(tool_call_id=cid, tool_name=name, args=args, provider_metadata=metadata or {})


FIRST: list[Part] = [
    TextPart(text="Looking it up first."),
    call("c1", "lookup", order="42"),
    call("c2", "refund", SIG, order="42"),
    call("c3", "pick_colour", {"google": {"thoughtSignature": "c2lnLTM="}}, question="Colour?"),
]


def model() -> ScriptedModel:
    return ScriptedModel([FIRST, [TextPart(text="Refunded, wrapped in blue.")]])


async def collect(run: Any) -> list[AgentEvent]:
    return [event async for event in run]


def shape(request: ModelRequest) -> list[tuple[Any, ...]]:
    """Every field the adapters read from the conversation of a request (ids and times aside)."""
    out: list[tuple[Any, ...]] = []
    for message in request.messages:
        for part in message.parts:
            if part.type == "tool-call":
                out.append(
                    (message.role, part.type, part.tool_call_id, part.tool_name, part.args, part.args_json,
                     part.provider_metadata, part.provider_executed, part.title)
                )  # fmt: skip
            elif part.type == "tool-result":
                out.append(
                    (message.role, part.type, part.tool_call_id, part.tool_name, part.output, part.is_error,
                     part.provider_metadata)
                )  # fmt: skip
            else:
                out.append((message.role, part.type, getattr(part, "text", None), part.provider_metadata))
        out.append((message.role, "end"))
    return out


async def uninterrupted_request(outputs: dict[str, Any]) -> ModelRequest:
    """The second request of the same conversation when nothing waits (the tools return ``outputs``)."""

    def pick(question: str) -> str:
        """Ask the user to pick a gift wrap colour in the page.

        Args:
            question: What to ask.
        """
        return str(outputs["c3"])

    twin = model()
    agent = Agent(twin, tools=[lookup, free_refund, tool(pick, name="pick_colour")])
    await agent.run("Refund order 42", session_id="twin")
    return twin.requests[1].request


# -- pausing ------------------------------------------------------------------------------------------


async def test_a_step_with_awaited_calls_runs_the_others_then_pauses_durably() -> None:
    RAN.clear()
    store = MemoryStore()
    agent = Agent(model(), tools=[lookup, refund, pick_colour], store=store)
    run = agent.stream("Refund order 42", session_id="s")
    events = await collect(run)
    result = run.result
    assert result is not None and result.status == "paused" and result.output == ""
    assert RAN == ["lookup 42"]  # neither the refund nor the client tool ran
    assert [(p.tool_call_id, p.tool_name, p.args, p.kind, p.session_id) for p in result.pending] == [
        ("c2", "refund", {"order": "42"}, "approval", "s"),
        ("c3", "pick_colour", {"question": "Colour?"}, "output", "s"),
    ]
    assert all(p.message_id == result.messages[1].id for p in result.pending)
    # stored: the assistant message, the finished call's result, and the waiting calls' statuses
    rows = {r.tool_call_id: r.status for r in await store.tool_calls("s")}
    assert rows == {"c1": "ok", "c2": "awaiting_approval", "c3": "awaiting_output"}
    assert [m.role for m in await store.raw_messages("s")] == ["user", "assistant", "tool"]
    # the events: the others complete first, then what waits is announced, then the run ends paused
    kinds = [e.type for e in events]
    assert kinds.index("tool-call-complete") < kinds.index("tool-call-awaiting")
    awaiting = [e for e in events if isinstance(e, ToolCallAwaiting)]
    assert [(e.tool_call_id, e.kind, e.args, e.message_id) for e in awaiting] == [
        ("c2", "approval", {"order": "42"}, result.messages[1].id),
        ("c3", "output", {"question": "Colour?"}, result.messages[1].id),
    ]
    assert kinds[-2:] == ["step-finish", "interaction-end"]
    end = events[-1]
    assert isinstance(end, InteractionEnd) and end.status == "paused"
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert await agent.pending("s") == result.pending
    # while paused, the repaired history is still valid for every provider: a result for every call
    history = await store.load_history("s")
    assert [m.role for m in history] == ["user", "assistant", "tool"]
    assert [(r.tool_call_id, r.output == UNANSWERED_OUTPUT) for r in history[2].tool_results] == [
        ("c1", False),
        ("c2", True),
        ("c3", True),
    ]


async def test_resuming_runs_approved_calls_and_sends_what_an_uninterrupted_run_sends() -> None:
    RAN.clear()
    scripted = model()
    store = MemoryStore()
    agent = Agent(scripted, tools=[lookup, refund, pick_colour], store=store)
    await agent.run("Refund order 42", session_id="s")
    RAN.clear()
    # a new agent object on the same store, as another process would have
    resumed = Agent(scripted, tools=[lookup, refund, pick_colour], store=store)
    run = resumed.stream(session_id="s", approvals={"c2": True}, tool_outputs={"c3": "blue"})
    events = await collect(run)
    result = run.result
    assert (
        result is not None and result.status == "completed" and result.output == "Refunded, wrapped in blue."
    )
    assert RAN == ["refund 42"]
    assert [(e.tool_call_id, e.resolution) for e in events if isinstance(e, ToolCallResolved)] == [
        ("c3", "output"),
        ("c2", "approved"),
    ]
    done = [(e.tool_call_id, e.status, e.output) for e in events if isinstance(e, ToolCallComplete)]
    assert done == [("c3", "ok", "blue"), ("c2", "ok", "refunded 10 EUR on 42")]
    assert not any(e.type == "user-turn-start" for e in events)
    assert [(x.call.tool_call_id, x.status) for x in result.tool_executions] == [("c2", "ok")]
    # the continuation: the paused calls' provider metadata, every result in call order, nothing else
    continuation = scripted.requests[1].request
    assert shape(continuation) == shape(await uninterrupted_request({"c3": "blue"}))
    assistant = continuation.messages[1]
    assert [c.provider_metadata for c in assistant.tool_calls] == [
        {},
        SIG,
        {"google": {"thoughtSignature": "c2lnLTM="}},
    ]
    results = continuation.messages[2]
    assert [(r.tool_call_id, r.output, r.is_error) for r in results.tool_results] == [
        ("c1", "order 42: shipped", False),
        ("c2", "refunded 10 EUR on 42", False),
        ("c3", "blue", False),
    ]
    assert [m.role for m in continuation.messages] == ["user", "assistant", "tool"]
    rows = {r.tool_call_id: r.status for r in await store.tool_calls("s")}
    assert rows == {"c1": "ok", "c2": "ok", "c3": "ok"}
    assert await agent.pending("s") == []
    # the step's results, stored in two tool messages, load as one: what the model was sent
    history = await store.load_history("s")
    assert shape(ModelRequest(messages=tuple(history[:3]))) == shape(continuation)


async def test_denials_and_client_failures_become_results_the_model_reads() -> None:
    scripted = model()
    store = MemoryStore()
    agent = Agent(scripted, tools=[lookup, refund, pick_colour], store=store)
    await agent.run("Refund order 42", session_id="s")
    run = agent.stream(
        session_id="s",
        approvals={"c2": Denied("too expensive")},
        tool_outputs={"c3": ToolFailed("page closed")},
    )
    events = await collect(run)
    resolved = [(e.tool_call_id, e.resolution, e.reason) for e in events if isinstance(e, ToolCallResolved)]
    assert resolved == [("c2", "denied", "too expensive"), ("c3", "failed", "page closed")]
    complete = {
        e.tool_call_id: (e.status, e.output, e.is_error) for e in events if isinstance(e, ToolCallComplete)
    }
    assert complete == {
        "c2": ("denied", "Tool call denied by the user: too expensive", True),
        "c3": ("error", "page closed", True),
    }
    sent = scripted.requests[1].request.messages[2].tool_results
    assert [(r.output, r.is_error) for r in sent] == [
        ("order 42: shipped", False),
        ("Tool call denied by the user: too expensive", True),
        ("page closed", True),
    ]
    rows = {r.tool_call_id: r.status for r in await store.tool_calls("s")}
    assert rows == {"c1": "ok", "c2": "denied", "c3": "error"}


async def test_a_plain_false_is_a_denial_without_reason() -> None:
    scripted = ScriptedModel([[call("c2", "refund", order="1")], [TextPart(text="ok")]])
    agent = Agent(scripted, tools=[refund])
    assert (await agent.run("go", session_id="s")).status == "paused"
    result = await agent.run(session_id="s", approvals={"c2": False})
    assert result.status == "completed"
    (sent,) = scripted.requests[1].request.messages[2].tool_results
    assert (sent.output, sent.is_error) == ("Tool call denied by the user.", True)


async def test_client_outputs_are_kept_whole_and_cut_for_the_model_like_tool_outputs() -> None:
    scripted = ScriptedModel([[call("c3", "pick_colour", question="?")], [TextPart(text="ok")]])
    store = MemoryStore()
    agent = Agent(scripted, tools=[pick_colour], store=store, max_tool_output_chars=40)
    await agent.run("go", session_id="s")
    big = {"colour": "blue", "notes": "x" * 500}
    await agent.run(session_id="s", tool_outputs={"c3": big})
    (row,) = await store.tool_calls("s")
    assert (row.status, row.output) == ("ok", big)
    (sent,) = scripted.requests[1].request.messages[2].tool_results
    assert sent.output != big and len(str(sent.output)) < 200


async def test_partial_answers_run_what_was_answered_and_pause_again() -> None:
    RAN.clear()
    scripted = model()
    store = MemoryStore()
    agent = Agent(scripted, tools=[lookup, refund, pick_colour], store=store)
    await agent.run("Refund order 42", session_id="s")
    run = agent.stream(session_id="s", approvals={"c2": True})
    events = await collect(run)
    assert run.result is not None and run.result.status == "paused"
    assert [p.tool_call_id for p in run.result.pending] == ["c3"]
    assert [e.tool_call_id for e in events if isinstance(e, ToolCallAwaiting)] == ["c3"]  # announced again
    assert RAN == ["lookup 42", "refund 42"] and len(scripted.requests) == 1
    result = await agent.run(session_id="s", tool_outputs={"c3": "blue"})
    assert result.status == "completed"
    assert shape(scripted.requests[1].request) == shape(await uninterrupted_request({"c3": "blue"}))
    assert [m.role for m in await store.raw_messages("s")] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "tool",
        "assistant",
    ]


def test_run_sync_resumes_too(tmp_path: Any) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 's.db'}"
    scripted = model()
    agent = Agent(scripted, tools=[lookup, refund, pick_colour], store=url)
    assert agent.run_sync("Refund order 42", session_id="s").status == "paused"
    again = Agent(scripted, tools=[lookup, refund, pick_colour], store=url)
    result = again.run_sync(session_id="s", approvals={"c2": True}, tool_outputs={"c3": "blue"})
    assert result.status == "completed" and result.output == "Refunded, wrapped in blue."


# -- a new prompt instead of answers --------------------------------------------------------------------


async def test_a_new_prompt_closes_the_awaited_calls_as_unanswered_first() -> None:
    RAN.clear()
    scripted = ScriptedModel([FIRST, [TextPart(text="Fine, no refund.")]])
    store = MemoryStore()
    agent = Agent(scripted, tools=[lookup, refund, pick_colour], store=store)
    await agent.run("Refund order 42", session_id="s")
    run = agent.stream("Forget it.", session_id="s")
    events = await collect(run)
    kinds = [e.type for e in events]
    assert kinds[:7] == [
        "interaction-start",
        "tool-call-resolved",
        "tool-call-complete",
        "tool-call-resolved",
        "tool-call-complete",
        "message-persisted",
        "user-turn-start",
    ]
    assert {e.tool_call_id: e.status for e in events if isinstance(e, ToolCallComplete)} == {
        "c2": "unanswered",
        "c3": "unanswered",
    }
    assert RAN == ["lookup 42"]
    sent = scripted.requests[1].request.messages
    assert [m.role for m in sent] == ["user", "assistant", "tool", "user"]
    assert [(r.tool_call_id, r.output, r.is_error) for r in sent[2].tool_results] == [
        ("c1", "order 42: shipped", False),
        ("c2", UNANSWERED_OUTPUT, True),
        ("c3", UNANSWERED_OUTPUT, True),
    ]
    rows = {r.tool_call_id: r.status for r in await store.tool_calls("s")}
    assert rows == {"c1": "ok", "c2": "unanswered", "c3": "unanswered"}


async def test_a_prompt_with_answers_applies_them_and_closes_only_the_rest() -> None:
    scripted = ScriptedModel([FIRST, [TextPart(text="ok")]])
    agent = Agent(scripted, tools=[lookup, refund, pick_colour])
    await agent.run("Refund order 42", session_id="s")
    await agent.run("Also gift wrap it.", session_id="s", approvals={"c2": True})
    sent = scripted.requests[1].request.messages
    assert [m.role for m in sent] == ["user", "assistant", "tool", "user"]
    assert [r.output for r in sent[2].tool_results] == [
        "order 42: shipped",
        "refunded 10 EUR on 42",
        UNANSWERED_OUTPUT,
    ]


# -- answers that cannot be applied ------------------------------------------------------------------


async def _paused(store: Store | None = None) -> Agent[Any, str]:
    agent = Agent(model(), tools=[lookup, refund, pick_colour], store=store or MemoryStore())
    assert (await agent.run("Refund order 42", session_id="s")).status == "paused"
    return agent


@pytest.mark.parametrize(
    ("answers", "ids", "says"),
    [
        ({"approvals": {"nope": True}}, ["nope"], "nope is not awaiting an answer"),
        ({"approvals": {"c1": True}}, ["c1"], "c1 is not awaiting an answer"),  # it ran already
        ({"approvals": {"c3": True}}, ["c3"], "client tool: give its output, not an approval"),
        ({"tool_outputs": {"c2": "x"}}, ["c2"], "awaits approval: approve or deny it, not an output"),
        ({"approvals": {"c2": "yes"}}, ["c2"], "must be True, False or Denied(reason)"),
        ({"approvals": {("other", "c2"): True}}, ["c2"], "c2 (session other) is not awaiting"),
    ],
)
async def test_answers_for_calls_that_are_not_awaited_are_a_typed_error_and_write_nothing(
    answers: dict[str, Any], ids: list[str], says: str
) -> None:
    store = MemoryStore()
    agent = await _paused(store)
    before = (await store.raw_messages("s"), await store.tool_calls("s"))
    with pytest.raises(ResumeError) as caught:
        await agent.run(session_id="s", **answers)
    assert says in str(caught.value) and caught.value.tool_call_ids == ids
    assert (await store.raw_messages("s"), await store.tool_calls("s")) == before
    assert len(await agent.pending("s")) == 2  # still paused, still answerable
    assert (
        await agent.run(session_id="s", approvals={"c2": True}, tool_outputs={"c3": "b"})
    ).status == "completed"


async def test_a_run_without_prompt_needs_answers() -> None:
    agent = await _paused()
    with pytest.raises(ResumeError, match="nothing to run"):
        await agent.run(session_id="s")
    fresh = Agent(model(), tools=[lookup])
    with pytest.raises(ResumeError, match="a prompt is needed"):
        await fresh.run(session_id="new")
    with pytest.raises(ResumeError, match="not awaiting"):
        await fresh.run(session_id="new", approvals={"c2": True})


# -- deciding which calls wait -------------------------------------------------------------------------


async def test_a_predicate_decides_per_call_with_the_context_and_validated_arguments() -> None:
    seen: list[tuple[str | None, str, dict[str, Any]]] = []

    def over_100(ctx: RunContext[Any], args: dict[str, Any]) -> bool:
        assert ctx.call is not None
        seen.append((ctx.tool_call_id, ctx.session_id, args))
        return bool(args["amount"] > 100)

    async def async_never(ctx: RunContext[Any], args: dict[str, Any]) -> bool:
        await asyncio.sleep(0)
        return False

    big = tool(refund_body, name="refund", requires_approval=over_100)
    small = tool(lookup, name="lookup", requires_approval=async_never)
    scripted = ScriptedModel(
        [[call("a", "refund", order="1", amount="50"), call("b", "refund", order="2", amount=500),
          call("c", "lookup", order="3")], [TextPart(text="ok")]]
    )  # fmt: skip
    result = await Agent(scripted, tools=[big, small]).run("go", session_id="s")
    assert [p.tool_call_id for p in result.pending] == ["b"]
    assert seen == [("a", "s", {"order": "1", "amount": 50}), ("b", "s", {"order": "2", "amount": 500})]


async def test_a_failing_predicate_asks_and_a_call_that_cannot_run_is_not_held() -> None:
    def broken(ctx: RunContext[Any], args: dict[str, Any]) -> bool:
        raise RuntimeError("policy service down")

    guarded = tool(refund_body, name="refund", requires_approval=broken)
    scripted = ScriptedModel(
        [[call("a", "refund", order="1"), call("b", "refund", wrong="x"), call("c", "pick_colour")],
         [TextPart(text="ok")]]
    )  # fmt: skip
    result = await Agent(scripted, tools=[guarded, pick_colour]).run("go", session_id="s")
    assert [(p.tool_call_id, p.kind) for p in result.pending] == [("a", "approval")]
    errors = {x.call.tool_call_id: x.result.output for x in result.tool_executions}
    assert set(errors) == {"b", "c"} and all("invalid arguments" in str(v) for v in errors.values())


async def test_excluded_tools_are_not_held_and_external_bodies_never_run() -> None:
    scripted = ScriptedModel([[call("c3", "pick_colour", question="?")], [TextPart(text="ok")]])
    result = await Agent(scripted, tools=[pick_colour]).run("go", exclude_tools=["pick_colour"])
    assert result.status == "completed"
    assert "unknown tool" in str(result.tool_executions[0].result.output)


def test_marking_options_are_checked() -> None:
    with pytest.raises(ConfigError, match="external tool runs on the client"):
        tool(refund_body, external=True, requires_approval=True)
    with pytest.raises(ConfigError, match="must be a bool or a function"):
        tool(refund_body, requires_approval="yes")  # type: ignore[arg-type]


async def test_a_toolset_marks_its_tools_by_name_and_a_tools_own_mark_wins() -> None:
    own = tool(lookup, name="lookup", requires_approval=True)
    toolset = Toolset([own, refund_body, client_twin], name="shop", requires_approval=["refund_body"])
    listed = {t.name: t.requires_approval for t in await toolset.list_tools()}
    assert listed == {"lookup": True, "refund_body": True, "client_twin": False}
    scripted = ScriptedModel([[call("a", "refund_body", order="1"), call("b", "client_twin", question="?")]])
    result = await Agent(scripted, tools=[toolset]).run("go")
    assert [p.tool_call_id for p in result.pending] == ["a"]


async def test_mcp_tools_are_marked_by_their_server() -> None:
    from tests.tools.test_mcp import stdio_server

    server = stdio_server(timeout=10, requires_approval=["add"])
    try:
        scripted = ScriptedModel(
            [[call("a", "add", a=2, b=3), call("e", "echo", text="hi")], [TextPart(text="5")]]
        )
        agent = Agent(scripted, tools=[server])
        paused = await agent.run("go", session_id="s")
        assert [p.tool_call_id for p in paused.pending] == ["a"]
        assert [x.call.tool_call_id for x in paused.tool_executions] == ["e"]
        done = await agent.run(session_id="s", approvals={"a": True})
        assert "5" in str(done.tool_executions[0].result.output)
    finally:
        await server.aclose()


async def test_no_gate_work_when_no_tool_can_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    async def must_not_run(*args: Any, **kwargs: Any) -> dict[str, str]:
        raise AssertionError("the gate ran for a run without approval or client tools")

    monkeypatch.setattr(_pause.Gate, "statuses", must_not_run)
    scripted = ScriptedModel([[call("c1", "lookup", order="1")], [TextPart(text="ok")]])
    result = await Agent(scripted, tools=[lookup, free_refund]).run("go")
    assert result.status == "completed" and result.pending == []


# -- sub-agents ----------------------------------------------------------------------------------------


def buy(sku: str) -> str:
    """Buy an item."""
    RAN.append(f"buy {sku}")
    return f"bought {sku}"


def answer_after_tools(first: Sequence[Part], then: str) -> ScriptedModel:
    """A model that makes ``first`` calls, then answers ``then`` plus the last result it was given."""

    def turns(request: ModelRequest) -> Sequence[Part]:
        results = [m for m in request.messages if m.role == "tool"]
        if results:
            return [TextPart(text=then + str(results[-1].tool_results[0].output))]
        return first

    return ScriptedModel(turns)


def shopper_and_main(
    store: Store, parent_calls: Sequence[Part] = (), child_calls: Sequence[Part] = ()
) -> tuple[Agent[Any, str], ScriptedModel, ScriptedModel]:
    """A main agent delegating to a shopper sub-agent whose ``buy`` needs approval (both use ``c1``)."""
    child_model = answer_after_tools(
        child_calls or [TextPart(text="Found one."), call("c1", "buy", SIG, sku="LP-849")], "Bought: "
    )
    shopper = Agent(child_model, tools=[tool(buy, requires_approval=True)], name="shopper")
    parent_model = answer_after_tools(parent_calls or [call("c1", "shopper", task="a laptop")], "Done: ")
    main = Agent(parent_model, tools=[shopper.as_tool("shopper", "Buys things"), refund], store=store)
    return main, parent_model, child_model


async def test_a_sub_agents_approval_pauses_its_caller_and_resumes_the_same_child_session() -> None:
    RAN.clear()
    store = MemoryStore()
    main, _, child_model = shopper_and_main(store)
    run = main.stream("Buy me a laptop", session_id="R")
    events = await collect(run)
    result = run.result
    assert result is not None and result.status == "paused"
    (pending,) = result.pending
    child = pending.session_id
    assert child.startswith("R.sub_") and (pending.tool_call_id, pending.tool_name) == ("c1", "buy")
    # the approval request reaches the user's session: the child's events, then the caller's
    awaiting = [(e.session_id, e.kind, e.sub_session_id) for e in events if isinstance(e, ToolCallAwaiting)]
    assert awaiting == [(child, "approval", None), ("R", "subagent", child)]
    ends = [(e.session_id, e.status) for e in events if isinstance(e, InteractionEnd)]
    assert ends == [(child, "paused"), ("R", "paused")]
    rows = {(r.session_id, r.tool_call_id): r.status for s in ("R", child) for r in await store.tool_calls(s)}
    assert rows == {("R", "c1"): "awaiting_subagent", (child, "c1"): "awaiting_approval"}
    assert await main.pending("R") == result.pending
    assert RAN == []
    # "c1" alone is ambiguous in this tree only if the caller's own c1 were awaited: it is not, so it works;
    # the precise key works as well
    resumed = main.stream(session_id="R", approvals={(child, "c1"): True})
    events = await collect(resumed)
    assert resumed.result is not None and resumed.result.status == "completed"
    assert resumed.result.output == "Done: Bought: bought LP-849"
    assert RAN == ["buy LP-849"]
    assert [(e.session_id, e.resolution) for e in events if isinstance(e, ToolCallResolved)] == [
        ("R", "resumed"),
        (child, "approved"),
    ]
    # the child continued its own session, with the paused call's metadata sent back
    sent = child_model.requests[-1].request.messages
    assert [m.role for m in sent] == ["user", "assistant", "tool"]
    assert sent[1].tool_calls[0].provider_metadata == SIG
    assert {s.id for s in await store.list_sessions()} == {"R", child}
    assert [r.status for r in await store.tool_calls("R")] == ["ok"]


async def test_a_new_prompt_abandons_a_paused_sub_agent() -> None:
    store = MemoryStore()
    main, parent_model, _ = shopper_and_main(store)
    paused = await main.run("Buy me a laptop", session_id="R")
    child = paused.pending[0].session_id
    with pytest.raises(ResumeError, match="not awaiting"):
        await main.run(session_id="R", approvals={("R", "c1"): True})  # the caller's call is not a question
    result = await main.run("Never mind.", session_id="R")
    assert result.status == "completed"
    assert [r.status for r in await store.tool_calls("R")] == ["unanswered"]
    sent = parent_model.requests[-1].request.messages
    assert [m.role for m in sent] == ["user", "assistant", "tool", "user"]
    assert sent[2].tool_results[0].output == UNANSWERED_OUTPUT
    # the child keeps a valid history (its call shows as not answered) and is never continued
    assert [m.role for m in await store.load_history(child)] == ["user", "assistant", "tool"]
    assert await main.pending("R") == []


async def test_ambiguous_ids_in_a_tree_must_be_answered_by_session() -> None:
    main, _, _ = shopper_and_main(
        MemoryStore(),
        parent_calls=[call("c1", "shopper", task="a laptop"), call("c2", "refund", order="9")],
        child_calls=[call("c2", "buy", sku="X")],  # the child reuses the caller's id c2
    )
    paused = await main.run("go", session_id="R")
    assert sorted((p.session_id == "R", p.tool_call_id) for p in paused.pending) == [
        (False, "c2"),
        (True, "c2"),
    ]
    with pytest.raises(ResumeError, match="ambiguous"):
        await main.run(session_id="R", approvals={"c2": True})
    keys: dict[Any, Any] = {p.key: True for p in paused.pending}
    assert (await main.run(session_id="R", approvals=keys)).status == "completed"


# -- stopping a resumed run -------------------------------------------------------------------------


async def test_closing_a_resumed_run_while_an_approved_call_runs_cancels_it() -> None:
    started = asyncio.Event()

    async def slow_refund(order: str) -> str:
        """Refund slowly."""
        started.set()
        await asyncio.sleep(30)
        return "never"

    store = MemoryStore()
    scripted = ScriptedModel([[call("c2", "refund", order="1"), call("c3", "pick_colour", question="?")]])
    agent = Agent(
        scripted, tools=[tool(slow_refund, name="refund", requires_approval=True), pick_colour], store=store
    )
    await agent.run("go", session_id="s")
    async with agent.stream(session_id="s", approvals={"c2": True}) as run:
        async for event in run:
            if event.type == "tool-call-active":
                await started.wait()
                break
    rows = {r.tool_call_id: r.status for r in await store.tool_calls("s")}
    assert rows == {"c2": "cancelled", "c3": "cancelled"}
    history = await store.load_history("s")
    assert [m.role for m in history] == ["user", "assistant", "tool"]
    assert await agent.pending("s") == []


async def test_pending_calls_round_trip_as_dicts() -> None:
    pending = PendingCall(
        tool_call_id="c", tool_name="t", args={"a": 1}, kind="output", session_id="s", message_id="m"
    )
    assert PendingCall.from_dict(pending.to_dict()) == pending


async def test_an_unknown_session_has_nothing_pending(tmp_path: Any) -> None:
    store = await open_store(f"sqlite+aiosqlite:///{tmp_path / 'p.db'}")
    try:
        assert await Agent(model(), store=store).pending("nobody") == []
    finally:
        await store.close()


async def test_an_approved_call_is_pending_while_it_runs_so_a_crash_makes_it_interrupted() -> None:
    store = MemoryStore()
    seen: list[str] = []

    async def careful_refund(order: str) -> str:
        """Refund, looking at the store while running."""
        seen.extend(r.status for r in await store.tool_calls("s"))
        return "refunded"

    scripted = ScriptedModel([[call("c2", "refund", order="1")], [TextPart(text="ok")]])
    agent = Agent(scripted, tools=[tool(careful_refund, name="refund", requires_approval=True)], store=store)
    await agent.run("go", session_id="s")
    await agent.run(session_id="s", approvals={"c2": True})
    assert seen == ["pending"]  # not awaiting_approval: a crash now is an interrupted call, never asked twice


async def test_an_answer_bound_to_the_call_it_was_shown_for_refuses_a_reused_id() -> None:
    """``approvals={call.shown: True}`` binds the approval to the call's message: after the model reused the
    id for another call (a new turn, an edit), it is a ``ResumeError`` that writes and runs nothing."""
    RAN.clear()
    scripted = ScriptedModel(
        [[call("c9", "refund", order="first")], [call("c9", "refund", order="second")], [TextPart(text="ok")]]
    )
    store = MemoryStore()
    agent = Agent(scripted, tools=[refund], store=store)
    (shown,) = (await agent.run("Refund first", session_id="s")).pending
    (now,) = (await agent.run("Refund second instead", session_id="s")).pending
    assert (shown.tool_call_id, now.tool_call_id) == ("c9", "c9") and shown.message_id != now.message_id
    with pytest.raises(ResumeError) as refused:
        await agent.run(session_id="s", approvals={shown.shown: True})
    assert refused.value.tool_call_ids == ["c9"] and "another one" in str(refused.value)
    assert RAN == [] and await agent.pending("s") == [now]
    result = await agent.run(session_id="s", approvals={now.shown: True})
    assert result.status == "completed" and RAN == ["refund second"]
