"""Arbitrary model output into the native and ReAct drivers, arbitrary events into the Transcript:
never an unhandled exception, always a typed error or an error result, nothing stored that breaks the
next request on any adapter."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from tests.reliability.wire_checks import adapters, unanswered_calls
from toolwire import Agent, ToolwireError
from toolwire.errors import ProviderHTTPError
from toolwire.events import event_from_dict
from toolwire.messages import Usage
from toolwire.models._builder import ToolArgsAccumulator
from toolwire.models.base import (
    Finish,
    Model,
    ModelRequest,
    ModelStreamPart,
    StreamStart,
    TextDelta,
    TextEnd,
    TextStart,
    ToolInputDelta,
    ToolInputStart,
)
from toolwire.store import MemoryStore
from toolwire.transcript import Transcript


def lookup(order_id: str, count: int = 1) -> dict[str, Any]:
    """Look up an order."""
    return {"order_id": order_id, "count": count}


nasty_text = st.one_of(
    st.text(max_size=200),
    st.text(alphabet=st.characters(categories=["Cs"]), min_size=1, max_size=5),  # lone surrogates
    st.just("\x00\u2028\ufeff'\"); DROP TABLE toolwire_messages; --"),
    st.integers(min_value=1, max_value=5).map(lambda n: "x" * (10**n)),  # up to 100 KB
)
deep_json = st.integers(min_value=1, max_value=400).map(lambda n: "[" * n + "]" * n)
args_text = st.one_of(
    nasty_text,
    deep_json,
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=20),
        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=3),
        max_leaves=10,
    ).map(json.dumps),
    st.builds(
        lambda oid, cnt: json.dumps({"order_id": oid, "count": cnt}),
        nasty_text,
        st.integers() | st.text(max_size=5),
    ),
)
tool_names = st.one_of(st.just("lookup"), st.text(max_size=30))


class ArbitraryModel(Model):
    """Streams one arbitrary step (text + calls) and then answers plainly."""

    provider = "arbitrary"
    model_name = "arbitrary"

    def __init__(self, text: str, calls: list[tuple[str, str]], fragment: int) -> None:
        self.text, self.calls, self.fragment, self.turn = text, calls, max(1, fragment), 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamPart]:
        self.turn += 1
        yield StreamStart()
        if self.turn > 1:
            yield TextStart(id="t")
            yield TextDelta(id="t", delta="ok")
            yield TextEnd(id="t")
            yield Finish(reason="stop", usage=Usage(requests=1))
            return
        if self.text:
            yield TextStart(id="t")
            yield TextDelta(id="t", delta=self.text)
            yield TextEnd(id="t")
        for i, (name, raw) in enumerate(self.calls):
            acc = ToolArgsAccumulator()
            yield ToolInputStart(tool_call_id=f"call_{i}", tool_name=name)
            for start in range(0, len(raw), self.fragment):
                acc.add(raw[start : start + self.fragment])
                yield ToolInputDelta(tool_call_id=f"call_{i}", delta=raw[start : start + self.fragment])
            yield acc.end(id=f"call_{i}", tool_name=name)
        yield Finish(reason="tool-calls" if self.calls else "stop", usage=Usage(requests=1))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example(text="\ud800", calls=[], fragment=1)  # found: a lone surrogate in text could not be sent
@example(
    text="x", calls=[("lookup", '{"0":"\\uD800","":0}')], fragment=1
)  # found: ...nor one escaped in args
@given(
    text=nasty_text,
    calls=st.lists(st.tuples(tool_names, args_text), max_size=3),
    fragment=st.integers(min_value=1, max_value=64),
)
def test_arbitrary_native_tool_output_is_handled_and_stays_sendable(
    text: str, calls: list[tuple[str, str]], fragment: int
) -> None:
    async def scenario() -> None:
        store = MemoryStore()
        agent = Agent(ArbitraryModel(text, calls, fragment), tools=[lookup], store=store)
        with contextlib.suppress(ToolwireError):  # a typed error is an allowed outcome
            await agent.run("go", session_id="s")
        history = await store.load_history("s")
        for i, message in enumerate(history):
            if message.role == "assistant" and message.tool_calls:
                assert [r.tool_call_id for r in history[i + 1].tool_results] == [
                    c.tool_call_id for c in message.tool_calls
                ]
        # the next turn builds a valid request on every adapter
        for provider, factory in adapters(sent := []).items():
            try:
                await Agent(factory(), store=store).run("next", session_id="s")
            except ProviderHTTPError:
                pass
            except ToolwireError:  # e.g. content a provider cannot represent: typed, never a crash
                continue
            assert unanswered_calls(provider, sent[-1]) == [], provider
            json.dumps(sent[-1])  # the body is plain JSON

    asyncio.run(scenario())


class TextModel(Model):
    """A model without function calling that answers every request with the same text."""

    provider = "text"
    model_name = "text"
    supports_tools = False

    def __init__(self, text: str) -> None:
        self.text = text

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamPart]:
        yield StreamStart()
        yield TextStart(id="t")
        yield TextDelta(id="t", delta=self.text)
        yield TextEnd(id="t")
        yield Finish(reason="stop", usage=Usage(requests=1))


@settings(max_examples=80, deadline=None)
@given(
    text=st.one_of(
        nasty_text,
        args_text,
        st.builds(
            lambda action, args: json.dumps({"action": action, "args": args}),
            st.one_of(st.just("lookup"), st.text(max_size=10)),
            st.one_of(
                st.dictionaries(st.text(max_size=8), st.integers() | st.text(max_size=8), max_size=3),
                st.text(max_size=8),
            ),
        ),
    )
)
def test_arbitrary_react_output_gives_a_result_or_a_typed_error(text: str) -> None:
    async def scenario() -> None:
        store = MemoryStore()
        agent = Agent(TextModel(text), tools=[lookup], store=store, max_steps=3)
        with contextlib.suppress(ToolwireError):
            await agent.run("go", session_id="s")
        history = await store.load_history("s")
        for i, message in enumerate(history):
            if message.role == "assistant" and message.tool_calls:
                assert history[i + 1].role == "tool"

    asyncio.run(scenario())


event_types = st.sampled_from(
    [
        "interaction-start", "interaction-end", "user-turn-start", "step-start", "step-finish", "text-start",
        "text-delta", "text-end", "reasoning-start", "reasoning-delta", "reasoning-end", "tool-input-start",
        "tool-input-delta", "tool-input-available", "tool-call-active", "tool-call-heartbeat", "tool-progress",
        "system-message", "media", "custom-data", "tool-call-complete", "message-persisted", "error",
    ]
)  # fmt: skip
ids = st.sampled_from(["a", "b", "c", ""])


@st.composite
def raw_events(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(event_types)
    event: dict[str, Any] = {
        "type": kind,
        "session_id": draw(st.sampled_from(["s1", "s2", "s3"])),
        "parent_session_id": draw(st.sampled_from([None, "s1", "s2", "ghost"])),
        "user_session_id": "s1",
        "interaction_id": draw(st.sampled_from(["i1", "i2"])),
        "seq": draw(st.integers(min_value=-3, max_value=40)),
        "id": draw(ids),
        "message_id": draw(ids),
        "tool_call_id": draw(ids),
        "tool_name": draw(st.sampled_from(["lookup", "x"])),
        "delta": draw(st.text(max_size=5)),
        "step": draw(st.integers(min_value=0, max_value=3)),
        "finish_reason": "stop",
        "text": draw(st.text(max_size=5)),
        "content_type": "image/png",
        "name": "n",
        "error_type": "E",
        "message": {"role": "user", "parts": [{"type": "text", "text": "hi"}]}
        if kind == "user-turn-start"
        else "m",
        "elapsed": 1.0,
        "role": "assistant",
        "is_error": draw(st.booleans()),
        "output": draw(st.text(max_size=5))
        if kind == "interaction-end"
        else draw(st.none() | st.text(max_size=5)),
        "status": draw(st.sampled_from(["ok", "error"])) if kind == "tool-call-complete" else "completed",
    }
    return event


@settings(max_examples=200, deadline=None)
@given(st.lists(raw_events(), max_size=60))
def test_arbitrary_event_streams_never_break_the_transcript(raw: list[dict[str, Any]]) -> None:
    transcript = Transcript()
    applied = 0
    for data in raw:
        fields = {k: v for k, v in data.items() if k in _FIELDS[data["type"]]}
        try:
            event = event_from_dict(fields)
        except ValidationError:
            continue  # not an event at all (the wire decoder rejects it before any client sees it)
        transcript.apply(event)
        applied += 1
    for message in transcript.messages:
        ids_seen = [c.tool_call_id for c in message.tool_calls]
        assert len(ids_seen) == len(set(ids_seen)), "a call attached twice to one message"


def _fields() -> dict[str, set[str]]:
    from typing import get_args

    from toolwire.events import AgentEvent

    union = get_args(get_args(AgentEvent)[0])
    out: dict[str, set[str]] = {}
    for cls in union:
        out[cls.__dataclass_fields__["type"].default] = set(cls.__dataclass_fields__)
    return out


_FIELDS = _fields()
