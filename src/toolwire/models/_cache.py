"""Prompt caching, on by default: a conversation pays for its history once, not on every step.

Each step of a conversation sends the previous step's request again, plus what happened since. Providers
cache such a prefix, each by its own rule:

- Anthropic (also Claude on Vertex AI and the Messages shape on Bedrock) caches up to explicit
  ``cache_control`` breakpoints, at most 4 per request
  (https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching). :func:`anthropic_breakpoints` puts
  one after the tools, one after the system prompt and one on the last block of the last message: the next
  step finds this step's whole request in the cache (the API looks back up to 20 blocks from a breakpoint
  for an earlier one's entry) and writes the longer prefix for the step after. A prefix shorter than the
  model's minimum (1024 or 2048 tokens) is simply not cached; nothing fails. A compacted request names the
  ends of the blocks of old tool results it sends as stand-ins (``ModelRequest.cache_marks``): the last two
  get a breakpoint (the tools' goes, the system's caching them too), so when the trimming boundary moves the
  prefix up to the previous one is read from the cache, not written again.
- Bedrock Converse caches up to ``cachePoint`` blocks (same places, same limit of 4) on the models that
  support them (https://docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html): Claude 3.7
  Sonnet, 3.5 Haiku and Claude 4 and later, and Amazon Nova. Other models reject them, so they get none.
- OpenAI caches any prefix of 1024 tokens or more by itself; ``prompt_cache_key`` routes the requests of one
  conversation to the same cache (https://platform.openai.com/docs/guides/prompt-caching). Only OpenAI's own
  API gets the field: a compatible server may reject an unknown one.
- Gemini 2.5+, DeepSeek and Groq cache implicitly, with nothing to ask for.

All of them need the prefix byte-identical from one step to the next, which every adapter keeps: history is
serialised in order with fixed key order, tools in the order given, and no time or random value is sent
(``tests/models/test_prompt_caching.py`` holds each adapter to it). A breakpoint marker is not part of the
cached content, so moving the last-message breakpoint forward does not break the prefix.

``ModelSettings.cache_breakpoints=False`` leaves the breakpoints out and ``prompt_cache_key=False`` the key.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from typing import Any

from toolwire.models._http import Json
from toolwire.models.base import ModelRequest

EPHEMERAL: Json = {"type": "ephemeral"}
CACHE_POINT: Json = {"cachePoint": {"type": "default"}}
_MAX_BREAKPOINTS = 4
_UNMARKABLE = frozenset({"thinking", "redacted_thinking"})
"""Anthropic block types that cannot carry ``cache_control`` (a breakpoint goes on the block before)."""


def anthropic_breakpoints(body: Json, marks: Sequence[tuple[int, int]] = ()) -> None:
    """Mark the stable prefix of a Messages body with ``cache_control`` breakpoints (in place): the last
    tool, the system prompt, the last markable block of the last message, and with ``marks`` (the ends of
    the blocks compaction trimmed, as ``(message, block)``) the last two of them. Breakpoints the body
    already has (``settings.extra``, a caller's own) count towards the limit of 4, and are kept.

    With marks, the tools go unmarked when a system prompt is there: the system's breakpoint caches the
    tools too (they come first in the cached prefix), and the two marks matter more. The previous mark is
    what a step after a move of the trimming boundary reads from the cache (its prefix was written when it
    was the last mark), the last one what the next move will read."""
    budget = _MAX_BREAKPOINTS - _count_marks(body)
    system = body.get("system")
    has_system = isinstance(system, str) and bool(system)
    tools = body.get("tools")
    last_tool = tools[-1] if isinstance(tools, list) and tools else None
    if (
        budget > 0
        and isinstance(last_tool, dict)
        and "cache_control" not in last_tool
        and not (marks and has_system)
    ):
        tools[-1] = {**last_tool, "cache_control": EPHEMERAL}  # type: ignore[index]
        budget -= 1
    if budget > 0 and has_system:
        # The string form takes no breakpoint; as one text block it means the same to the model.
        body["system"] = [{"type": "text", "text": system, "cache_control": EPHEMERAL}]
        budget -= 1
    messages = body.get("messages")
    if budget > 1 and isinstance(messages, list) and messages:
        # The newest marks first: one breakpoint is kept for the last message.
        for turn, block in list(reversed(marks))[: min(2, budget - 1)]:
            if turn < len(messages) - 1 and _mark_block(messages[turn], block):
                budget -= 1
    if budget > 0 and isinstance(messages, list) and messages:
        content = messages[-1].get("content")
        if isinstance(content, str) and content:
            messages[-1] = {
                **messages[-1],
                "content": [{"type": "text", "text": content, "cache_control": EPHEMERAL}],
            }
        elif isinstance(content, list):
            for index in range(len(content) - 1, -1, -1):
                block = content[index]
                if isinstance(block, dict) and block.get("type") not in _UNMARKABLE and _has_content(block):
                    if "cache_control" not in block:
                        content[index] = {**block, "cache_control": EPHEMERAL}
                    break


def _mark_block(message: Json, at: int) -> bool:
    """A breakpoint on block ``at`` of ``message``, or the markable block before it; whether one was set."""
    content = message.get("content")
    if not isinstance(content, list):
        return False
    for index in range(min(at, len(content) - 1), -1, -1):
        block = content[index]
        if isinstance(block, dict) and block.get("type") not in _UNMARKABLE and _has_content(block):
            if "cache_control" in block:
                return False
            content[index] = {**block, "cache_control": EPHEMERAL}
            return True
    return False


def _has_content(block: Json) -> bool:
    return block.get("type") != "text" or bool(block.get("text"))  # an empty text block cannot be cached


def _count_marks(body: Json) -> int:
    """The breakpoints ``body`` has already, where the API takes them (a block of the tools, the system or a
    message, or of a tool result's content): from ``settings.extra`` or content sent as given."""

    def marked(blocks: Any) -> int:
        if not isinstance(blocks, list):
            return 0
        count = 0
        for block in blocks:
            if isinstance(block, dict):
                count += "cache_control" in block
                if block.get("type") == "tool_result":
                    count += marked(block.get("content"))
        return count

    messages = body.get("messages")
    in_messages = (
        sum(marked(m.get("content")) for m in messages if isinstance(m, dict))
        if isinstance(messages, list)
        else 0
    )
    return marked(body.get("tools")) + marked(body.get("system")) + in_messages


_BEDROCK_CACHING = re.compile(
    r"claude-(?:3-7-sonnet|3-5-haiku|(?:opus|sonnet|haiku)-[4-9])|claude-[4-9]|amazon\.nova|(?:^|\.)nova-"
)
"""Bedrock model ids that take ``cachePoint`` blocks (the supported-models table of the prompt caching page)."""


def bedrock_caches(model_id: str) -> bool:
    """Whether the Bedrock model takes ``cachePoint`` blocks."""
    return bool(_BEDROCK_CACHING.search(model_id.lower()))


def bedrock_cache_points(body: Json) -> None:
    """Add ``cachePoint`` blocks (in place) after the tools, after the system prompt and at the end of the last
    message of a Converse body, within the limit of 4 (counting those already there)."""
    budget = _MAX_BREAKPOINTS - _count_points(body)
    tools = (body.get("toolConfig") or {}).get("tools")
    if budget > 0 and isinstance(tools, list) and tools and CACHE_POINT not in tools:
        tools.append(CACHE_POINT)
        budget -= 1
    system = body.get("system")
    if budget > 0 and isinstance(system, list) and system and CACHE_POINT not in system:
        system.append(CACHE_POINT)
        budget -= 1
    messages = body.get("messages")
    if budget > 0 and isinstance(messages, list) and messages:
        content = messages[-1].get("content")
        if isinstance(content, list) and content and content[-1] != CACHE_POINT:
            content.append(CACHE_POINT)


def _count_points(body: Json) -> int:
    """The ``cachePoint`` blocks ``body`` has already (in the tools, the system or a message's content)."""

    def points(blocks: Any) -> int:
        return (
            sum(isinstance(b, dict) and "cachePoint" in b for b in blocks) if isinstance(blocks, list) else 0
        )

    messages = body.get("messages")
    in_messages = (
        sum(points(m.get("content")) for m in messages if isinstance(m, dict))
        if isinstance(messages, list)
        else 0
    )
    return points((body.get("toolConfig") or {}).get("tools")) + points(body.get("system")) + in_messages


def prompt_cache_key(request: ModelRequest) -> str | None:
    """The ``prompt_cache_key`` of a request: the settings' own string, else the request's ``cache_key``
    (the conversation's, set by the agent), else one derived from what every step of a conversation with the
    same instructions and tools shares; ``None`` when ``settings.prompt_cache_key`` is False."""
    setting = request.settings.prompt_cache_key
    if setting is False:
        return None
    if isinstance(setting, str):
        return setting
    if request.cache_key:
        # OpenAI caps the key's length (64 characters, unverified): a longer session id is hashed.
        if len(request.cache_key) <= 64:
            return request.cache_key
        return "tw-" + hashlib.sha256(request.cache_key.encode()).hexdigest()[:32]
    tools = [(t.name, t.description, t.parameters) for t in request.tools]
    stable = json.dumps([request.instructions, tools], sort_keys=True, default=str)
    return "tw-" + hashlib.sha256(stable.encode()).hexdigest()[:32]


__all__ = [
    "anthropic_breakpoints",
    "bedrock_cache_points",
    "bedrock_caches",
    "prompt_cache_key",
]
