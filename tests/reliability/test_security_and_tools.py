"""Secrets never reach the store, logs or events; tool arguments are data, never SQL or shell; tool
faults (raise, hang, non-JSON, 10 MB) are recorded with nothing lost, through the real SQLite store."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.fault_server import Behaviour, FaultServer, finish_frames, text_frames, tool_frames
from toolwire import Agent, TextPart, ToolCallPart, open_store, tool
from toolwire.events import event_to_dict
from toolwire.models.openai_chat import OpenAIChatModel
from toolwire.models.scripted import ScriptedModel

SECRET = "sk-test-SECRET-0123456789abcdef"
INJECTION = "'); DROP TABLE toolwire_messages; -- $(rm -rf /) `reboot` \"; DELETE FROM toolwire_sessions; --"


def echo(text: str) -> dict[str, str]:
    """Echo text back."""
    return {"echo": text}


def db_bytes(db: Path) -> bytes:
    return b"".join(Path(f"{db}{s}").read_bytes() for s in ("", "-wal") if Path(f"{db}{s}").exists())


async def test_api_keys_and_authorization_headers_are_never_stored_logged_or_emitted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    args = json.dumps({"text": "hello"})
    script = [
        Behaviour(frames=tool_frames("call_1", "echo", args) + finish_frames("tool_calls")),
        Behaviour(
            status=401, body=json.dumps({"error": {"message": "bad key", "code": "invalid_api_key"}}).encode()
        ),
    ]
    db = tmp_path / "secrets.db"
    store = await open_store(f"sqlite+aiosqlite:///{db}")
    async with FaultServer(script) as server:
        model = OpenAIChatModel("fault-model", api_key=SECRET, base_url=server.base_url)
        agent = Agent(model, tools=[echo], store=store, retries=0)
        events: list[Any] = []
        with pytest.raises(Exception, match="bad key"):
            async for event in agent.stream("say hello", session_id="s"):
                events.append(event)
        await agent.aclose()
    await store.close()
    assert server.requests, "the key was used"
    assert SECRET.encode() not in db_bytes(db)
    assert SECRET not in json.dumps([event_to_dict(e) for e in events])
    assert SECRET not in caplog.text
    assert "Bearer" not in caplog.text


async def test_tool_arguments_are_stored_as_data_never_interpolated(tmp_path: Path) -> None:
    db = tmp_path / "inject.db"
    store = await open_store(f"sqlite+aiosqlite:///{db}")
    model = ScriptedModel(
        [
            [ToolCallPart(tool_call_id=INJECTION, tool_name="echo", args={"text": INJECTION})],
            [TextPart(text=INJECTION)],
        ]
    )
    result = await Agent(model, tools=[echo], store=store).run(INJECTION, session_id=INJECTION)
    assert result.output == INJECTION
    (row,) = await store.tool_calls(INJECTION)
    assert (row.tool_call_id, row.args, row.output) == (INJECTION, {"text": INJECTION}, {"echo": INJECTION})
    assert [m.role for m in await store.load_history(INJECTION)] == ["user", "assistant", "tool", "assistant"]
    assert [s.id for s in await store.list_sessions()] == [INJECTION]  # tables intact
    await store.close()


async def test_tool_faults_are_recorded_with_nothing_lost(tmp_path: Path) -> None:
    @tool(timeout=0.1)
    async def hangs() -> str:
        """Hang."""
        await asyncio.sleep(30)
        return "never"

    def raises() -> None:
        """Raise."""
        raise RuntimeError("disk on fire")

    def not_json() -> object:
        """Return a set."""
        return {1, 2, object()}

    def huge() -> str:
        """Return 10 MB."""
        return "y" * 10_000_000

    calls = [
        ToolCallPart(tool_call_id=n, tool_name=n, args={}) for n in ("hangs", "raises", "not_json", "huge")
    ]
    db = tmp_path / "tools.db"
    store = await open_store(f"sqlite+aiosqlite:///{db}")
    model = ScriptedModel([calls, [TextPart(text="handled")]])
    agent = Agent(model, tools=[hangs, raises, not_json, huge], store=store, max_tool_output_chars=2_000)
    result = await agent.run("break things", session_id="s")
    assert result.output == "handled"
    rows = {r.tool_call_id: r for r in await store.tool_calls("s")}
    assert rows["hangs"].status == "error" and "timed out after 0.1s" in rows["hangs"].output
    assert rows["raises"].status == "error" and "RuntimeError: disk on fire" in rows["raises"].output
    assert rows["not_json"].status == "error" and "not JSON-serialisable" in rows["not_json"].output["error"]
    assert rows["huge"].status == "ok" and rows["huge"].output == "y" * 10_000_000  # full output kept
    sent = model.requests[1].messages[-1].tool_results
    shown = {r.tool_call_id: r for r in sent}
    assert (
        len(shown["huge"].output) < 2_200 and "showing 2,000 of 10,000,000 characters" in shown["huge"].output
    )
    assert all(shown[n].is_error for n in ("hangs", "raises", "not_json"))
    await store.close()


async def test_another_providers_metadata_is_never_sent(tmp_path: Path) -> None:
    """History made on Gemini (signature) and Anthropic (thinking signature) continued on OpenAI Chat."""
    from toolwire.messages import ReasoningPart

    store = await open_store(f"sqlite+aiosqlite:///{tmp_path / 'mix.db'}")
    model = ScriptedModel(
        [
            [
                ReasoningPart(
                    text="thinking",
                    signature="ANTHROPIC-SIG",
                    provider_metadata={"anthropic": {"x": "A-META"}},
                ),
                ToolCallPart(
                    tool_call_id="c1",
                    tool_name="echo",
                    args={"text": "x"},
                    provider_metadata={"google": {"thoughtSignature": "GOOGLE-SIG"}},
                ),
            ],
            [TextPart(text="done")],
        ]
    )
    await Agent(model, tools=[echo], store=store).run("go", session_id="s")
    async with FaultServer([Behaviour(frames=text_frames("ok") + finish_frames("stop"))]) as server:
        openai = OpenAIChatModel("m", api_key="k", base_url=server.base_url)
        await Agent(openai, tools=[echo], store=store).run("next", session_id="s")
        await openai.aclose()
    body = json.dumps(server.requests[0])
    assert "GOOGLE-SIG" not in body and "ANTHROPIC-SIG" not in body and "A-META" not in body
    assert '"tool_call_id": "c1"' in body  # the call and its result are still there
    await store.close()
