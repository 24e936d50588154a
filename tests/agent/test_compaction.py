"""Compaction (issue 26 item 2): a session whose history outgrows its model's context window goes on.

A scripted model with a 3,000-token window answers a support session whose every turn adds a ~2 KB tool
result. What is sent shrinks (old tool results first, then a stored summary), every request fits, the store
keeps every message, the summary is reused by a later process, and the requests stay valid for every wire
family. A summariser that fails falls back to leaving old turns out; a provider's context-length refusal is
compacted and asked again once. A request budget of its own (``Compaction.max_request_tokens``) compacts before
the window share, also for a model whose window is unknown, and moves the trimming boundary rarely, so the
prefix sent stays the same from step to step in between."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from tests.cli.helpers import toolwire
from tests.reliability.wire_checks import adapters, unanswered_calls
from toolwire import Agent, TextPart, ToolCallPart
from toolwire.agent._compaction import STAND_IN, SUMMARY_INSTRUCTIONS
from toolwire.agent.config import Compaction
from toolwire.errors import ContextLengthExceeded, ProviderError
from toolwire.events import CompactionEvent
from toolwire.messages import Message, MessagesAdapter, Part
from toolwire.models import estimate_request_tokens
from toolwire.models.base import ModelRequest
from toolwire.models.scripted import ScriptedModel
from toolwire.store.sql import SQLStore

WINDOW = 3_000
NOTE = "I ordered a parcel of tea and a mug last week and still have no news of either of them. " * 6
"""What each user turn says before its question (~550 characters: turns add up even with results trimmed)."""


def lookup(order: str) -> str:
    """Look an order up."""
    return f"order {order}: " + "shipped from the Lyon warehouse, tracking pending. " * 40  # ~2 KB


def summarising(request: ModelRequest) -> bool:
    """A request for a summary (its instructions are the summariser's, their length bound filled in)."""
    return (request.instructions or "").startswith(SUMMARY_INSTRUCTIONS[:80])


class Support:
    """A scripted support model that records what it was sent (and how large it was)."""

    def __init__(self, *, failing_summary: bool = False, window: int | None = WINDOW) -> None:
        self.model = ScriptedModel(self.respond)
        self.model.context_window = window
        self.sent: list[ModelRequest] = []
        self.summaries: list[ModelRequest] = []
        self.failing_summary = failing_summary

    def respond(self, request: ModelRequest) -> Sequence[Part]:
        if summarising(request):
            self.summaries.append(request)
            if self.failing_summary:
                raise RuntimeError("the summariser is down")
            return [TextPart(text="The user asked about orders A0 onwards; each shipped from Lyon.")]
        self.sent.append(request)
        last = request.messages[-1]
        if last.role == "user":
            order = last.text.split()[-1]  # the order named at the end of the prompt
            return [ToolCallPart(tool_call_id=f"call_{order}", tool_name="lookup", args={"order": order})]
        return [TextPart(text=f"Your order {last.tool_results[0].tool_call_id[5:]} has shipped.")]


async def _session(agent: Agent[Any, str], turns: range, session_id: str = "s") -> list[Any]:
    events: list[Any] = []
    for turn in turns:
        prompt = f"{NOTE} Where is order A{turn}"
        async with agent.stream(prompt, session_id=session_id) as run:
            events.extend([e async for e in run])
        assert run.result is not None and run.result.status == "completed", run.result
    return events


async def test_a_session_that_outgrows_the_window_goes_on_and_every_request_fits(tmp_path: Path) -> None:
    support = Support()
    store = await SQLStore.open(f"sqlite+aiosqlite:///{tmp_path / 's.db'}")
    agent = Agent(support.model, tools=[lookup], store=store)
    events = await _session(agent, range(20))

    budget = int(WINDOW * Compaction().threshold)
    sizes = [estimate_request_tokens(support.model, r) for r in support.sent]
    assert max(sizes) <= budget, sizes
    whole = estimate_request_tokens(
        support.model, ModelRequest(messages=tuple(await store.load_history("s")))
    )
    assert whole > WINDOW  # the session did outgrow the window: without compaction it would fail

    # Old tool results went first: a stand-in keeps each call answered.
    trimmed = [r for m in support.sent[-1].messages if m.role == "tool" for r in m.tool_results]
    assert any("left out to fit the context window" in str(r.output) for r in trimmed) or support.summaries

    # Then a summary, stored once per compaction, announced, and what later requests start from.
    records = await store.compactions("s")
    announced = [e for e in events if isinstance(e, CompactionEvent)]
    assert records and len(announced) == len(records) == len(support.summaries)
    latest = records[-1]
    assert announced[-1].compaction_id == latest.id and latest.model == "scripted"
    assert latest.tokens_after < latest.tokens_before
    last = support.sent[-1]
    assert latest.summary in (last.instructions or "")
    assert last.messages[0].role == "user"

    # The store kept everything: 20 turns of user, call, result, answer.
    assert len(await store.raw_messages("s")) == 20 * 4
    await agent.aclose()

    # Another process: the stored summary is where its requests start.
    again = Support()
    reopened = await SQLStore.open(f"sqlite+aiosqlite:///{tmp_path / 's.db'}")
    later = Agent(again.model, tools=[lookup], store=reopened)
    await _session(later, range(20, 21))
    first = again.sent[0]
    assert latest.summary in (first.instructions or "") and not again.summaries
    assert first.messages[0].id == latest.first_kept_message_id
    await later.aclose()

    # `toolwire sessions show` lists it.
    shown = toolwire("sessions", "show", "s", "--store", f"sqlite+aiosqlite:///{tmp_path / 's.db'}")
    assert shown.returncode == 0, shown.stderr
    assert (
        f"compaction: messages before {latest.first_kept_message_id} summarised by scripted" in shown.stdout
    )
    assert latest.summary in shown.stdout.replace("\n", " ")


@pytest.mark.parametrize("family", ["openai-chat", "openai-responses", "anthropic", "gemini", "bedrock"])
async def test_a_compacted_request_is_valid_for_every_wire_family(family: str) -> None:
    support = Support()
    agent = Agent(support.model, tools=[lookup])
    await _session(agent, range(20))
    assert support.summaries or any(
        "left out" in str(r.output) for m in support.sent[-1].messages for r in m.tool_results
    )
    sent: list[Any] = []
    model = adapters(sent)[family]()
    compacted = support.sent[-1]
    with pytest.raises(ProviderError):  # the capturing client answers 400 once it holds the body
        async for _ in model.stream(compacted):
            pass
    assert sent and unanswered_calls(family, sent[0]) == []


async def test_a_failing_summariser_falls_back_to_leaving_old_turns_out() -> None:
    support = Support(failing_summary=True)
    agent = Agent(support.model, tools=[lookup])
    events = await _session(agent, range(20))
    assert support.summaries  # it was asked, and failed
    assert not [e for e in events if isinstance(e, CompactionEvent)]
    sizes = [estimate_request_tokens(support.model, r) for r in support.sent]
    assert max(sizes) <= WINDOW, sizes
    assert support.sent[-1].messages[0].role == "user"


async def test_compaction_off_sends_the_whole_history() -> None:
    support = Support()
    agent = Agent(support.model, tools=[lookup], compaction=False)
    await _session(agent, range(10))
    whole = estimate_request_tokens(support.model, support.sent[-1])
    assert whole > WINDOW and not support.summaries


async def test_a_context_length_refusal_is_compacted_and_asked_again_once() -> None:
    """A provider that counts more than the estimate (its tokenizer) refuses the request: the step
    compacts it and asks again, once."""
    support = Support()
    refusals: list[int] = []

    def strict(request: ModelRequest) -> Sequence[Part]:
        tokens = estimate_request_tokens(support.model, request)
        if not summarising(request) and tokens > WINDOW // 2:  # it counts twice as much
            refusals.append(tokens)
            raise ContextLengthExceeded(
                "prompt is too long", provider="scripted", limit=WINDOW // 2, requested=tokens
            )
        return support.respond(request)

    support.model = ScriptedModel(strict)
    support.model.context_window = WINDOW
    agent = Agent(support.model, tools=[lookup], retries=0)
    await _session(agent, range(10))
    assert refusals  # it did refuse, and each refusal was followed by a shorter request that passed
    assert all(estimate_request_tokens(support.model, r) <= WINDOW // 2 for r in support.sent)


def _trimmed(request: ModelRequest) -> bool:
    """Some tool result of ``request`` is sent as a stand-in."""
    stand_in = STAND_IN.split("{chars}")[1]
    return any(stand_in in str(r.output) for m in request.messages for r in m.tool_results)


def _stood_in(message: Message) -> bool:
    stand_in = STAND_IN.split("{chars}")[1]
    return any(stand_in in str(r.output) for r in message.tool_results)


def _large_result(message: Message) -> bool:
    """A tool message the compactor would trim (its result is large), or did."""
    return _stood_in(message) or any(len(r.output_text()) >= 400 for r in message.tool_results)


async def test_the_request_budget_compacts_before_the_window_share() -> None:
    """A window of 100,000 tokens (80 %: 80,000) and a budget of 2,400: every request stays within the
    budget, though the session grows far past it."""
    support = Support(window=100_000)
    agent = Agent(support.model, tools=[lookup], compaction=Compaction(max_request_tokens=2_400))
    await _session(agent, range(20))
    sizes = [estimate_request_tokens(support.model, r) for r in support.sent]
    assert max(sizes) <= 2_400, sizes
    assert _trimmed(support.sent[-1]) or support.summaries
    assert support.sent[-1].messages[0].role == "user"


async def test_a_model_whose_window_is_unknown_compacts_at_the_budget() -> None:
    support = Support(window=None)
    agent = Agent(support.model, tools=[lookup], compaction=Compaction(max_request_tokens=2_400))
    await _session(agent, range(20))
    sizes = [estimate_request_tokens(support.model, r) for r in support.sent]
    assert max(sizes) <= 2_400, sizes
    assert _trimmed(support.sent[-1]) or support.summaries


async def test_the_prefix_sent_stays_the_same_between_block_moves() -> None:
    """Between two moves of the trimming boundary (or a new summary) each step's request starts with the
    previous one's, byte for byte: what the provider cached is read again. The boundary moves rarely, and
    each move takes the request well under the budget (a block), not just under it."""
    budget = 8_000
    support = Support(window=None)
    agent = Agent(support.model, tools=[lookup], compaction=Compaction(max_request_tokens=budget))
    await _session(agent, range(60))

    def sent(request: ModelRequest) -> tuple[str, bytes]:
        return request.instructions or "", MessagesAdapter.dump_json(list(request.messages))

    moves: list[int] = []
    for index, (before, after) in enumerate(pairwise(support.sent), start=1):
        (instructions, earlier), (instructions_now, now) = sent(before), sent(after)
        if instructions_now != instructions or not now.startswith(earlier.removesuffix(b"]")):
            moves.append(index)
    sizes = [estimate_request_tokens(support.model, r) for r in support.sent]
    assert max(sizes) <= budget, sizes
    assert moves, "the session outgrew the budget: the boundary must have moved"
    # 120 steps: the boundary moved a handful of times, never on consecutive steps.
    assert len(moves) <= len(support.sent) // 10, moves
    assert all(later - earlier > 4 for earlier, later in pairwise(moves)), moves
    # Each move left the request at most ~80 % of the budget (a block of ~40 % of it trimmed at once; a
    # summary leaves less).
    assert all(sizes[i] <= budget * 0.8 for i in moves), [(i, sizes[i]) for i in moves]
    # Each trimmed request names the ends of its trimmed blocks (for providers with explicit breakpoints):
    # a message whose results and every earlier one's are stand-ins, the next one's not yet.
    trimmed = [r for r in support.sent if r.cache_marks]
    assert trimmed and all(_trimmed(r) for r in trimmed)
    for request in trimmed:
        ids = [m.id for m in request.messages]
        last_end = ids.index(request.cache_marks[-1])
        assert list(request.cache_marks) == sorted(request.cache_marks, key=ids.index)
        assert all(_stood_in(m) for m in request.messages[: last_end + 1] if _large_result(m))
        assert any(_large_result(m) and not _stood_in(m) for m in request.messages[last_end + 1 :])


async def test_without_a_request_budget_only_the_window_share_compacts() -> None:
    """``max_request_tokens=None``: a request grows past the default budget up to the window's share."""
    support = Support(window=100_000)
    agent = Agent(support.model, tools=[lookup], compaction=Compaction(max_request_tokens=None))
    await _session(agent, range(60))
    sizes = [estimate_request_tokens(support.model, r) for r in support.sent]
    default_budget = Compaction().max_request_tokens
    assert default_budget is not None and max(sizes) > default_budget, sizes
    assert not _trimmed(support.sent[-1]) and not support.summaries

    unknown = Support(window=None)  # and a model whose window is unknown is sent its history whole
    agent = Agent(unknown.model, tools=[lookup], compaction=Compaction(max_request_tokens=None))
    await _session(agent, range(5))
    assert not any(_trimmed(r) for r in unknown.sent) and not unknown.summaries


class Researcher:
    """A scripted model that looks up four orders in one turn before it answers."""

    def __init__(self, window: int) -> None:
        self.model = ScriptedModel(self.respond)
        self.model.context_window = window
        self.sent: list[ModelRequest] = []

    def respond(self, request: ModelRequest) -> Sequence[Part]:
        self.sent.append(request)
        turn = _turn_start(request)
        looked_up = sum(len(m.tool_results) for m in request.messages[turn:])
        if looked_up < 4:
            order = f"B{looked_up}"
            return [ToolCallPart(tool_call_id=f"call_{order}", tool_name="lookup", args={"order": order})]
        return [TextPart(text="All four have shipped.")]


def _turn_start(request: ModelRequest) -> int:
    return max(i for i, m in enumerate(request.messages) if m.role == "user")


async def test_the_budget_never_cuts_the_current_turn_the_window_share_does() -> None:
    """One turn of four ~2 KB results (~2,500 tokens): over a 1,500-token budget, it is sent whole while it
    fits the window's share; past that share (a 3,000-token window) its older results go."""
    roomy = Researcher(window=100_000)
    agent = Agent(roomy.model, tools=[lookup], compaction=Compaction(max_request_tokens=1_500))
    await agent.run("Where are orders B0 to B3?")
    last = roomy.sent[-1]
    assert estimate_request_tokens(roomy.model, last) > 1_500
    assert len(last.messages[-1].tool_results) == 1 and not _trimmed(last)

    tight = Researcher(window=WINDOW)
    agent = Agent(tight.model, tools=[lookup], compaction=Compaction(max_request_tokens=1_500))
    await agent.run("Where are orders B0 to B3?")
    assert _trimmed(tight.sent[-1])
    assert estimate_request_tokens(tight.model, tight.sent[-1]) <= int(WINDOW * Compaction().threshold)
