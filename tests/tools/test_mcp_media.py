"""MCP images, resources and progress through the real loop and every adapter.

The server is the MCP reference server ``@modelcontextprotocol/server-everything`` (pinned in
tests/server/node/package.json), started over stdio: ``get-tiny-image`` returns text + a PNG + text,
``get-resource-reference`` an embedded resource (text, or a text file as a base64 blob),
``get-resource-links`` resource links, ``trigger-long-running-operation`` sends progress notifications.
A scripted model calls them through the Agent loop; the history the model is sent next is then built into
each wire's request body, checked against the official SDK's request types and the blocks each wire has
for images (or its stand-in text).
"""

from __future__ import annotations

import base64
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.models.sdk_types import (
    check_anthropic,
    check_bedrock,
    check_gemini,
    check_openai_chat,
    check_openai_responses,
)
from toolwire import Agent, ToolCallPart
from toolwire.events import AgentEvent, MediaEvent, ToolProgress
from toolwire.messages import Message, TextPart, ToolResultPart
from toolwire.models.anthropic import AnthropicModel
from toolwire.models.anthropic._request import build_body as anthropic_body
from toolwire.models.base import ModelRequest
from toolwire.models.bedrock._request import build_body as bedrock_body
from toolwire.models.gemini._request import build_body as gemini_body
from toolwire.models.openai_chat import OpenAIChatModel
from toolwire.models.openai_chat._request import build_body as chat_body
from toolwire.models.openai_responses import OpenAIResponsesModel
from toolwire.models.openai_responses._request import build_body as responses_body
from toolwire.models.scripted import ScriptedModel
from toolwire.store import MemoryStore
from toolwire.tools import MCPServerStdio

EVERYTHING = (
    Path(__file__).resolve().parents[1]
    / "server/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
)
PNG = "image/png"


async def _step(*calls: tuple[str, str, dict[str, Any]]) -> tuple[list[AgentEvent], list[Message]]:
    """One step of these calls against server-everything; the events and the history sent next."""
    assert EVERYTHING.exists(), "run `npm ci` in tests/server/node (scripts/setup_node.sh)"
    node = shutil.which("node")
    assert node is not None
    server = MCPServerStdio(node, [str(EVERYTHING), "stdio"], timeout=30)
    parts = [ToolCallPart(tool_call_id=cid, tool_name=name, args=args) for cid, name, args in calls]
    model = ScriptedModel([parts, [TextPart("done")]])
    try:
        agent = Agent(model, tools=[server], store=MemoryStore())
        events = [event async for event in agent.stream("go", session_id="s")]
    finally:
        await server.aclose()
    return events, list(model.requests[1].messages)


def _result(history: list[Message], call_id: str) -> ToolResultPart:
    return next(p for m in history for p in m.tool_results if p.tool_call_id == call_id)


def _bodies(history: list[Message]) -> dict[str, dict[str, Any]]:
    """The next request of each wire, each checked against its SDK's request type."""
    request = ModelRequest(messages=history)
    bodies = {
        "anthropic": anthropic_body(request, AnthropicModel("claude-sonnet-4-5", api_key="k"))[0],
        "chat": chat_body(request, OpenAIChatModel("gpt-4o", api_key="k"))[0],
        "responses": responses_body(request, OpenAIResponsesModel("gpt-5", api_key="k"))[0],
        "gemini": gemini_body(request, vertex=False, stream_arguments=False)[0],
        "bedrock": bedrock_body(request, max_tokens=None, additional_fields={})[0],
    }
    check_anthropic(bodies["anthropic"])
    check_openai_chat(bodies["chat"])
    check_openai_responses(bodies["responses"])
    check_gemini(bodies["gemini"])
    check_bedrock(bodies["bedrock"], model_id="anthropic.claude-sonnet-4-5", stream=True)
    return bodies


async def test_an_image_result_becomes_each_wires_image_and_a_media_event() -> None:
    events, history = await _step(("img", "get-tiny-image", {}))
    output = _result(history, "img").output
    assert [b["type"] for b in output] == ["text", "image", "text"]
    image = output[1]
    assert image["mimeType"] == PNG and base64.b64decode(image["data"]).startswith(b"\x89PNG")
    (media,) = [e for e in events if isinstance(e, MediaEvent)]
    assert (media.content_type, media.data, media.tool_call_id) == (PNG, image["data"], "img")

    bodies = _bodies(history)
    before, after = output[0]["text"], output[2]["text"]
    # Anthropic: tool_result content with an image block whose source is base64 (the SDK type requires it).
    (result,) = bodies["anthropic"]["messages"][-1]["content"]
    assert result["content"] == [
        {"type": "text", "text": before},
        {"type": "image", "source": {"type": "base64", "media_type": PNG, "data": image["data"]}},
        {"type": "text", "text": after},
    ]
    # Chat: the tool message is text; the image follows in one user message.
    tool, attachments = bodies["chat"]["messages"][-2:]
    assert tool["role"] == "tool" and "[image/png attachment 1: in the next message]" in tool["content"]
    assert attachments["role"] == "user"
    assert attachments["content"][1] == {
        "type": "image_url",
        "image_url": {"url": f"data:{PNG};base64,{image['data']}"},
    }
    # Responses: the function output is a list with an input_image.
    (output_item,) = [i for i in bodies["responses"]["input"] if i.get("type") == "function_call_output"]
    assert output_item["output"][1] == {
        "type": "input_image",
        "image_url": f"data:{PNG};base64,{image['data']}",
    }
    # Gemini: the function response carries the image as inline data.
    (response,) = [
        p["functionResponse"]
        for c in bodies["gemini"]["contents"]
        for p in c["parts"]
        if "functionResponse" in p
    ]
    assert response["parts"] == [
        {"inlineData": {"mimeType": PNG, "data": image["data"], "displayName": "attachment-1"}}
    ]
    assert "[image/png attachment attachment-1]" in response["response"]["result"]
    # Bedrock: a toolResult image block.
    (tool_result,) = [
        b["toolResult"] for m in bodies["bedrock"]["messages"] for b in m["content"] if "toolResult" in b
    ]
    assert tool_result["content"][1] == {"image": {"format": "png", "source": {"bytes": image["data"]}}}


async def test_resources_and_links_become_text_each_wire_takes() -> None:
    _, history = await _step(
        ("text", "get-resource-reference", {"resourceType": "Text", "resourceId": 1}),
        ("blob", "get-resource-reference", {"resourceType": "Blob", "resourceId": 2}),
        ("links", "get-resource-links", {"count": 2}),
    )
    blob = _result(history, "blob").output
    (resource,) = [b for b in blob if b["type"] == "resource"]
    assert "blob" in resource and resource["mimeType"] == "text/plain"
    decoded = base64.b64decode(resource["blob"]).decode()

    bodies = _bodies(history)
    results = {b["tool_use_id"]: b["content"] for b in bodies["anthropic"]["messages"][-1]["content"]}
    # A text file sent as a blob is read as text, under the resource's URI.
    assert f"[resource {resource['uri']} (text/plain)]\n{decoded}" in [b["text"] for b in results["blob"]]
    links = [b["text"] for b in results["links"] if b["text"].startswith("[resource link:")]
    assert len(links) == 2
    tool_messages = {
        m["tool_call_id"]: m["content"] for m in bodies["chat"]["messages"] if m["role"] == "tool"
    }
    assert decoded in tool_messages["blob"] and "[resource link:" in tool_messages["links"]
    assert bodies["chat"]["messages"][-1]["role"] == "tool"  # no attachments: no extra user message


def test_media_a_wire_cannot_take_becomes_a_stand_in() -> None:
    """Audio in a tool result: Anthropic has no block for it; the stand-in text says so."""
    audio = {"type": "audio", "mimeType": "audio/wav", "data": base64.b64encode(b"RIFF....WAVE").decode()}
    call = ToolCallPart(tool_call_id="a1", tool_name="record", args={})
    result = ToolResultPart("record", tool_call_id="a1", output=[{"type": "text", "text": "recorded"}, audio])
    history = [
        Message.user("go"),
        Message(role="assistant", parts=(call,)),
        Message(role="tool", parts=(result,)),
    ]
    bodies = _bodies(history)
    (block,) = bodies["anthropic"]["messages"][-1]["content"]
    assert block["content"][1] == {
        "type": "text",
        "text": "[audio/wav attachment: Anthropic cannot take it in a tool result]",
    }
    (response,) = [
        p["functionResponse"]
        for c in bodies["gemini"]["contents"]
        for p in c["parts"]
        if "functionResponse" in p
    ]
    assert "parts" not in response and "Gemini cannot take it" in response["response"]["result"]
    (output_item,) = [i for i in bodies["responses"]["input"] if i.get("type") == "function_call_output"]
    assert output_item["output"][1]["text"].endswith("the Responses API cannot take it in a tool result]")


@pytest.mark.timeout(60)
async def test_progress_notifications_become_tool_progress_events() -> None:
    events, history = await _step(("long", "trigger-long-running-operation", {"duration": 0.3, "steps": 3}))
    progress = [(e.tool_call_id, e.fraction) for e in events if isinstance(e, ToolProgress)]
    assert progress == [("long", pytest.approx(1 / 3)), ("long", pytest.approx(2 / 3)), ("long", 1.0)]
    assert "Steps: 3" in str(_result(history, "long").output)
