"""A client-sent history (the AI SDK's ``messages``) is imported in one transaction, scoped to its session,
idempotent on resend, and never written by a refused request."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from toolwire import open_store
from toolwire.errors import SessionAccessError, StoreError
from toolwire.messages import Message, ToolCallPart, ToolResultPart
from toolwire.store import MemoryStore, SessionInfo

from .conftest import ROOT, serve
from .conftest import idle as _finish

pytestmark = pytest.mark.timeout(120)
ALICE, MALLORY = "tok-alice", "tok-mallory"


def _conversation(prefix: str, secret: str) -> list[dict[str, Any]]:
    return [
        {"id": f"{prefix}-u1", "role": "user", "parts": [{"type": "text", "text": "Status of T1?"}]},
        {
            "id": f"{prefix}-a1",
            "role": "assistant",
            "parts": [
                {"type": "step-start"},
                {
                    "type": "tool-lookup",
                    "toolCallId": "call_1",
                    "state": "output-available",
                    "input": {"txn": "T1"},
                    "output": {"status": secret},
                    "callProviderMetadata": {"google": {"thoughtSignature": "c2ln"}},
                },
                {"type": "step-start"},
                {"type": "text", "text": f"It is {secret}."},
            ],
        },
        {"id": f"{prefix}-u2", "role": "user", "parts": [{"type": "text", "text": "ok"}]},
    ]


async def test_message_ids_are_per_session_and_resends_are_idempotent(tmp_path: Path, store_url: str) -> None:
    async with serve(tmp_path, store_url=store_url) as server:
        async with server.client(ALICE) as alice, server.client(MALLORY) as mallory:
            first = await alice.post(
                "/api/chat", json={"id": "a-chat", "messages": _conversation("same", "alice-only")}
            )
            assert first.status_code == 200
            await _finish(alice, "a-chat")
            # Mallory reuses Alice's client message ids in her own conversation: no collision, no 500, no leak.
            other = await mallory.post(
                "/api/chat", json={"id": "m-chat", "messages": _conversation("same", "mallory")}
            )
            assert other.status_code == 200 and "alice-only" not in other.text
            history = await _finish(mallory, "m-chat")
            assert "alice-only" not in str(history)
            # Alice re-sends the same conversation plus a new turn: stored once, not twice. (Her client shows
            # the answer to "ok": a client that dropped it would be re-asking "ok", see test_ai_sdk_edits.)
            again = [
                *_conversation("same", "alice-only"),
                {"id": "same-a2", "role": "assistant", "parts": [{"type": "text", "text": "ok"}]},
                {"id": "same-u3", "role": "user", "parts": [{"type": "text", "text": "and now?"}]},
            ]
            assert (
                await alice.post("/api/chat", json={"id": "a-chat", "messages": again})
            ).status_code == 200
            history = await _finish(alice, "a-chat")
        roles = [m["role"] for m in history["messages"]]
        assert roles == ["user", "assistant", "tool", "assistant", "user", "assistant", "user", "assistant"]
        assert str(history).count("alice-only") == 2  # the imported result and text, once each


async def test_a_refused_request_writes_nothing(tmp_path: Path) -> None:
    async with serve(tmp_path, env={"TW_SLOW": "30"}) as server, server.client(ALICE) as alice:
        assert (await alice.post("/api/sessions/busy/messages", json={"text": "slow"})).status_code == 202
        # A second client sends its own (different) history into the running session: 409, nothing stored.
        refused = await alice.post(
            "/api/chat", json={"id": "busy", "messages": _conversation("x", "intruder")}
        )
        assert refused.status_code == 409
        assert (await alice.post("/api/sessions/busy/cancel")).json()["cancelled"] is True
        history = await _finish(alice, "busy")
        assert "intruder" not in str(history)
        # A history whose last part is malformed is refused before anything is written.
        broken = _conversation("y", "never-stored")
        broken[1]["parts"].append({"type": "tool-lookup", "toolCallId": 7})
        bad = await alice.post("/api/chat", json={"id": "fresh", "messages": broken})
        assert bad.status_code == 400
        assert (await alice.get("/api/sessions/fresh/messages")).status_code == 404


@pytest.mark.parametrize("store_kind", ["memory", "sqlite"])
async def test_import_is_one_transaction_and_checks_the_owner(tmp_path: Path, store_kind: str) -> None:
    store = MemoryStore() if store_kind == "memory" else await open_store(f"sqlite:///{tmp_path / 'i.db'}")
    try:
        messages = [
            Message.user("hi", id="m1"),
            Message(
                role="assistant", parts=(ToolCallPart(tool_call_id="c", tool_name="t", args={}),), id="m2"
            ),
            Message(
                role="tool", parts=(ToolResultPart(tool_call_id="c", tool_name="t", output="r"),), id="m3"
            ),
        ]
        info = SessionInfo(id="s", user_session_id="s", user_id="alice")
        assert await store.import_history(info, messages, interaction_id="i") is True
        assert await store.import_history(info, messages, interaction_id="i") is False  # idempotent
        with pytest.raises(SessionAccessError):
            await store.import_history(
                SessionInfo(id="s", user_id="mallory"), [Message.user("x")], interaction_id="i"
            )
        assert [m.id for m in await store.raw_messages("s")] == ["m1", "m2", "m3"]
        if store_kind == "sqlite":
            # A message the store refuses half-way (it names another session) fails the whole import.
            poison = [Message.user("first", id="p1"), Message.user("x", id="p2", session_id="elsewhere")]
            with pytest.raises(StoreError):
                await store.import_history(SessionInfo(id="p", user_id="alice"), poison, interaction_id="i")
            assert await store.raw_messages("p") == []
    finally:
        await store.close()


_KILLED_IMPORT = """
import asyncio, sys
from toolwire import open_store
from toolwire.messages import Message
from toolwire.store import SessionInfo

async def main() -> None:
    store = await open_store(sys.argv[1])
    messages = [Message.user("m" * 2000 + str(i), id=f"m{i}") for i in range(4000)]
    print("importing", flush=True)
    await store.import_history(SessionInfo(id="k", user_id="alice"), messages, interaction_id="i")
    print("imported", flush=True)

asyncio.run(main())
"""


async def test_sigkill_during_an_import_leaves_all_or_nothing(tmp_path: Path) -> None:
    """The server process dies half-way through writing a client's history: never a truncated history."""
    url = f"sqlite:///{tmp_path / 'k.db'}"
    counts: list[int] = []
    env = dict(os.environ, PYTHONPATH=f"{ROOT / 'src'}")
    for delay in (0.05, 0.15, 0.3, 0.6, 1.2):
        (tmp_path / "k.db").unlink(missing_ok=True)
        child = subprocess.Popen(
            [sys.executable, "-c", _KILLED_IMPORT, url],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert child.stdout is not None
        assert child.stdout.readline().strip() == b"importing"
        await asyncio.sleep(delay)
        child.send_signal(signal.SIGKILL)
        child.wait(10)
        store = await open_store(url)
        try:
            counts.append(len(await store.raw_messages("k")))
        finally:
            await store.close()
    assert set(counts) <= {0, 4000}, counts
    assert 0 in counts  # at least one kill landed before the commit
