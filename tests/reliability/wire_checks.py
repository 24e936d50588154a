"""Build the next request with every adapter and check it is one the provider would accept: every tool
call answered by its result, in order, right after the turn that made it."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
from botocore.credentials import Credentials

from toolwire.models.anthropic import AnthropicModel
from toolwire.models.base import Model
from toolwire.models.bedrock import BedrockModel
from toolwire.models.gemini import GeminiModel
from toolwire.models.openai_chat import OpenAIChatModel
from toolwire.models.openai_responses import OpenAIResponsesModel


def capturing_client(sent: list[Any]) -> httpx.AsyncClient:
    """Records the request body and answers 400, so the run stops right after building the request."""

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(400, json={"error": {"message": "captured", "code": "captured"}})

    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


def adapters(sent: list[Any]) -> dict[str, Callable[[], Model]]:
    return {
        "openai-chat": lambda: OpenAIChatModel("m", api_key="k", http_client=capturing_client(sent)),
        "openai-responses": lambda: OpenAIResponsesModel(
            "m", api_key="k", http_client=capturing_client(sent)
        ),
        "anthropic": lambda: AnthropicModel("m", api_key="k", http_client=capturing_client(sent)),
        "gemini": lambda: GeminiModel("m", api_key="k", http_client=capturing_client(sent)),
        "bedrock": lambda: BedrockModel(
            "m",
            region="us-east-1",
            credentials=Credentials("AKIDEXAMPLE", "secret"),
            http_client=capturing_client(sent),
        ),
    }


def unanswered_calls(provider: str, body: dict[str, Any]) -> list[str]:
    """Tool call ids in the request with no result immediately after their turn (empty = valid)."""
    return CHECKS[provider](body)


def _openai_chat(body: dict[str, Any]) -> list[str]:
    missing: list[str] = []
    messages = body["messages"]
    for i, message in enumerate(messages):
        ids = [c["id"] for c in message.get("tool_calls") or []]
        following = []
        for later in messages[i + 1 :]:
            if later.get("role") != "tool":
                break
            following.append(later["tool_call_id"])
        missing += [x for x in ids if x not in following]
        if ids and following != ids:
            missing += [f"order:{ids}!={following}"]
    return missing


def _openai_responses(body: dict[str, Any]) -> list[str]:
    items = body["input"]
    calls = [(i, item["call_id"]) for i, item in enumerate(items) if item.get("type") == "function_call"]
    outputs = {
        item["call_id"]: i for i, item in enumerate(items) if item.get("type") == "function_call_output"
    }
    return [cid for i, cid in calls if cid not in outputs or outputs[cid] < i]


def _anthropic(body: dict[str, Any]) -> list[str]:
    missing: list[str] = []
    messages = body["messages"]
    for i, message in enumerate(messages):
        if message["role"] != "assistant" or isinstance(message["content"], str):
            continue
        ids = [b["id"] for b in message["content"] if b.get("type") == "tool_use"]
        if not ids:
            continue
        nxt = messages[i + 1] if i + 1 < len(messages) else {"content": []}
        results = [
            b["tool_use_id"]
            for b in nxt.get("content", [])
            if isinstance(b, dict) and b.get("type") == "tool_result"
        ]
        missing += [x for x in ids if x not in results]
    return missing


def _gemini(body: dict[str, Any]) -> list[str]:
    missing: list[str] = []
    contents = body["contents"]
    for i, content in enumerate(contents):
        calls = [p["functionCall"] for p in content.get("parts", []) if "functionCall" in p]
        if not calls:
            continue
        nxt = contents[i + 1] if i + 1 < len(contents) else {"parts": []}
        responses = [p["functionResponse"] for p in nxt.get("parts", []) if "functionResponse" in p]
        got = [(r.get("id"), r["name"]) for r in responses]
        missing += [c.get("id") or c["name"] for c in calls if (c.get("id"), c["name"]) not in got]
    return missing


def _bedrock(body: dict[str, Any]) -> list[str]:
    missing: list[str] = []
    messages = body["messages"]
    for i, message in enumerate(messages):
        ids = [b["toolUse"]["toolUseId"] for b in message["content"] if "toolUse" in b]
        if not ids:
            continue
        nxt = messages[i + 1] if i + 1 < len(messages) else {"content": []}
        results = [b["toolResult"]["toolUseId"] for b in nxt["content"] if "toolResult" in b]
        missing += [x for x in ids if x not in results]
    return missing


CHECKS: dict[str, Callable[[dict[str, Any]], list[str]]] = {
    "openai-chat": _openai_chat,
    "openai-responses": _openai_responses,
    "anthropic": _anthropic,
    "gemini": _gemini,
    "bedrock": _bedrock,
}
