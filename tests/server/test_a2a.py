"""A2A (protocol 0.3, JSON-RPC) driven by the official ``a2a-sdk`` Python client against a real server on
loopback: the agent card, ``message/send``, ``message/stream``, an approval round trip through
``input-required``, ``tasks/get``, ownership by bearer token, and malformed JSON-RPC (typed errors)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.client.errors import A2AClientError
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import TaskNotFoundError
from google.protobuf import json_format, struct_pb2

from tests.server.protocol_agents import build
from toolwire.server import create_app
from toolwire.store import MemoryStore

from .conftest import LiveServer, live_server

TOKENS = {"tok-alice": "alice", "tok-bob": "bob"}


async def _client(server: LiveServer, token: str | None, *, streaming: bool) -> Any:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    http = httpx.AsyncClient(headers=headers, timeout=30)
    return await create_client(server.url, ClientConfig(httpx_client=http, streaming=streaming))


def _message(
    text: str | None, context_id: str, *, task_id: str = "", data: dict[str, Any] | None = None
) -> pb.Message:
    parts = []
    if text is not None:
        parts.append(pb.Part(text=text))
    if data is not None:
        value = struct_pb2.Value()
        value.struct_value.update(data)
        parts.append(pb.Part(data=value))
    return pb.Message(
        role=pb.Role.ROLE_USER,
        message_id=f"m-{text}-{task_id}",
        context_id=context_id,
        task_id=task_id,
        parts=parts,
    )


async def _send(client: Any, message: pb.Message) -> list[dict[str, Any]]:
    return [
        json_format.MessageToDict(r)
        async for r in client.send_message(pb.SendMessageRequest(message=message))
    ]


async def test_the_card_and_message_send_answer_with_a_completed_task_in_the_session() -> None:
    app = create_app(build(), store=MemoryStore())
    async with live_server(app) as server:
        async with server.client() as plain:
            card = (await plain.get("/.well-known/agent-card.json")).json()
        client = await _client(server, None, streaming=False)
        (response,) = await _send(client, _message("lookup T4", "ctx-send"))
        task = response["task"]
        fetched = json_format.MessageToDict(await client.get_task(pb.GetTaskRequest(id=task["id"])))
        stored = await (await app.state.toolwire.store()).raw_messages("ctx-send")
    assert card["url"] == f"{server.url}/a2a" and card["capabilities"]["streaming"] is True
    assert task["contextId"] == "ctx-send" and task["status"]["state"] == "TASK_STATE_COMPLETED"
    answer = task["artifacts"][0]["parts"][0]["text"]
    assert answer.startswith("answered: ") and "settled" in answer
    assert task["id"] == f"ctx-send/{stored[0].id}"
    assert fetched["status"]["state"] == "TASK_STATE_COMPLETED" and fetched["id"] == task["id"]


async def test_message_stream_streams_the_task_text_and_a_final_status() -> None:
    app = create_app(build(), store=MemoryStore())
    async with live_server(app) as server:
        client = await _client(server, None, streaming=True)
        responses = await _send(client, _message("hello", "ctx-stream"))
    kinds = [next(iter(r)) for r in responses]
    assert kinds[0] == "task" and kinds[-1] == "statusUpdate"
    text = "".join(
        r["artifactUpdate"]["artifact"]["parts"][0]["text"] for r in responses if "artifactUpdate" in r
    )
    assert text == "Hi! How can I help?"
    assert responses[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_an_approval_round_trip_through_input_required() -> None:
    app = create_app(build(), store=MemoryStore())
    async with live_server(app) as server:
        client = await _client(server, None, streaming=False)
        (first,) = await _send(client, _message("refund A9", "ctx-approve"))
        task = first["task"]
        waiting = json_format.MessageToDict(await client.get_task(pb.GetTaskRequest(id=task["id"])))
        answer = _message(None, "ctx-approve", task_id=task["id"], data={"approvals": {"call_r": True}})
        (second,) = await _send(client, answer)
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    awaiting = task["status"]["message"]["parts"][1]["data"]["awaiting"]
    assert [(a["tool_call_id"], a["kind"]) for a in awaiting] == [("call_r", "approval")]
    assert waiting["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert second["task"]["id"] == task["id"]
    assert second["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert second["task"]["artifacts"][0]["parts"][0]["text"] == "answered: refunded A9"


async def test_another_users_context_and_task_are_not_found() -> None:
    app = create_app(build(), store=MemoryStore(), tokens=TOKENS)
    async with live_server(app) as server:
        alice = await _client(server, "tok-alice", streaming=False)
        (own,) = await _send(alice, _message("secret alice-ledger-7731", "alice-ctx"))
        bob = await _client(server, "tok-bob", streaming=False)
        with pytest.raises(TaskNotFoundError) as sent:
            await _send(bob, _message("hello", "alice-ctx"))
        with pytest.raises(TaskNotFoundError) as got:
            await bob.get_task(pb.GetTaskRequest(id=own["task"]["id"]))
        anonymous = await _client(server, None, streaming=False)
        with pytest.raises(A2AClientError) as unauthenticated:
            await _send(anonymous, _message("hello", "anon-ctx"))
        stored = await (await app.state.toolwire.store()).raw_messages("alice-ctx")
    for raised in (sent.value, got.value):
        assert "no session 'alice-ctx'" in str(raised) and "7731" not in str(raised)
    assert "401" in str(unauthenticated.value)
    assert [m.text for m in stored] == ["secret alice-ledger-7731", "alice-ledger-7731"]


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"{not json", -32700),
        (b"[1, 2]", -32600),
        (b'{"jsonrpc": "1.0", "id": 1, "method": "message/send"}', -32600),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "agent/dance", "params": {}}', -32601),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": []}', -32602),
        (
            b'{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": {"role": "agent"}}}',
            -32602,
        ),
        (
            b'{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": {"role": "user",'
            b' "messageId": "m", "contextId": "bad context", "parts": [{"kind": "text", "text": "hi"}]}}}',
            -32602,
        ),
        (
            b'{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": {"role": "user",'
            b' "messageId": "m", "parts": [{"kind": "file", "file": {"uri": "http://x"}}]}}}',
            -32005,
        ),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "nope"}}', -32001),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "ctx/msg_1"}}', -32001),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "tasks/pushNotificationConfig/set", "params": {}}', -32004),
    ],
)
async def test_bad_json_rpc_gets_a_typed_error_never_a_500(body: bytes, code: int) -> None:
    app = create_app(build(), store=MemoryStore())
    async with live_server(app) as server, server.client() as client:
        response = await client.post("/a2a", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 200, response.text
    assert response.json()["error"]["code"] == code
