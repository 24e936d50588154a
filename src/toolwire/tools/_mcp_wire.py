"""What an MCP server sends, read into toolwire's shapes: tool results, resources, prompts, paginated lists.

Both SDK generations are read: mcp 2.x names fields in snake_case, 1.x in the wire's camelCase (``_field``).
"""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from toolwire.errors import MissingExtraError
from toolwire.messages import FilePart, Message, Part, TextPart


@dataclass(frozen=True, slots=True, kw_only=True)
class MCPResource:
    """A resource an MCP server lists (``resources/list``)."""

    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class MCPResourceContent:
    """One content item of a read resource: ``text``, or ``blob`` (base64) for binary data."""

    uri: str
    mime_type: str | None = None
    text: str | None = None
    blob: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class MCPPromptArgument:
    """An argument an MCP prompt takes."""

    name: str
    description: str | None = None
    required: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class MCPPrompt:
    """A prompt template an MCP server lists (``prompts/list``)."""

    name: str
    title: str | None = None
    description: str | None = None
    arguments: tuple[MCPPromptArgument, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class MCPPromptResult:
    """A filled-in prompt (``prompts/get``), its messages as toolwire messages."""

    messages: tuple[Message, ...]
    description: str | None = None


def field_of(obj: Any, modern: str, legacy: str) -> Any:
    """mcp 2.x names fields in snake_case; 1.x used the wire's camelCase."""
    value = getattr(obj, modern, None)
    return value if value is not None else getattr(obj, legacy, None)


async def paginate(fetch: Callable[..., Awaitable[Any]], items: str) -> list[Any]:
    """Every page of a ``*/list`` request (``fetch`` is the session's bound method)."""
    try:
        from mcp.types import PaginatedRequestParams
    except ImportError as exc:  # pragma: no cover - the connection needed the SDK already
        raise MissingExtraError("mcp", "MCP servers", missing=exc.name) from exc
    found: list[Any] = []
    cursor: str | None = None
    for _ in range(1000):  # bounded: a server paginating forever is a broken server
        page = await (fetch(params=PaginatedRequestParams(cursor=cursor)) if cursor else fetch())
        found.extend(getattr(page, items))
        cursor = field_of(page, "next_cursor", "nextCursor")
        if not cursor:
            break
    return found


def resource(spec: Any) -> MCPResource:
    return MCPResource(
        uri=str(spec.uri),
        name=spec.name,
        title=getattr(spec, "title", None),
        description=getattr(spec, "description", None),
        mime_type=field_of(spec, "mime_type", "mimeType"),
    )


def resource_content(item: Any) -> MCPResourceContent:
    text, blob = getattr(item, "text", None), getattr(item, "blob", None)
    return MCPResourceContent(
        uri=str(item.uri), mime_type=field_of(item, "mime_type", "mimeType"), text=text, blob=blob
    )


def prompt(spec: Any) -> MCPPrompt:
    arguments = tuple(
        MCPPromptArgument(name=a.name, description=a.description, required=bool(a.required))
        for a in (spec.arguments or ())
    )
    return MCPPrompt(
        name=spec.name,
        title=getattr(spec, "title", None),
        description=spec.description,
        arguments=arguments,
    )


def prompt_result(result: Any) -> MCPPromptResult:
    messages = tuple(
        Message(role="assistant" if m.role == "assistant" else "user", parts=(_prompt_part(m.content),))
        for m in result.messages
    )
    return MCPPromptResult(messages=messages, description=result.description)


def _prompt_part(content: Any) -> Part:
    kind = getattr(content, "type", None)
    if kind == "text":
        return TextPart(text=content.text)
    if kind in ("image", "audio"):
        return FilePart(media_type=field_of(content, "mime_type", "mimeType"), data=content.data)
    if kind == "resource":
        embedded = content.resource
        mime = field_of(embedded, "mime_type", "mimeType") or "application/octet-stream"
        if getattr(embedded, "text", None) is not None:
            return TextPart(text=embedded.text)
        return FilePart(media_type=mime, data=embedded.blob, filename=str(embedded.uri))
    if kind == "resource_link":
        return TextPart(text=f"[{content.name}]({content.uri})")
    raise ValueError(f"an MCP prompt message holds content of an unknown type {kind!r}")


def tool_output(result: Any) -> Any:
    """A tool result as the model gets it: structured content, the text, or a list of content blocks."""
    structured = field_of(result, "structured_content", "structuredContent")
    if isinstance(structured, dict):
        return structured
    blocks = list(result.content or [])
    if all(getattr(b, "type", None) == "text" for b in blocks):
        return "\n".join(b.text for b in blocks)
    return [_block(b) for b in blocks]


def contents_output(contents: list[MCPResourceContent]) -> Any:
    """A read resource as a tool output, in the shape of an MCP tool's embedded resources (so every wire
    shows it as it shows those): the text alone when all of it is text."""
    if all(c.text is not None for c in contents):
        return "\n".join(c.text or "" for c in contents)
    blocks: list[dict[str, Any]] = []
    for c in contents:
        block: dict[str, Any] = {"type": "resource", "uri": c.uri, "mimeType": c.mime_type}
        block.update({"text": c.text} if c.text is not None else {"blob": c.blob})
        blocks.append(block)
    return blocks


def _block(block: Any) -> dict[str, Any]:
    kind = getattr(block, "type", "unknown")
    if kind == "text":
        return {"type": "text", "text": block.text}
    if kind in ("image", "audio"):
        data = block.data if isinstance(block.data, str) else base64.b64encode(block.data).decode()
        return {"type": kind, "mimeType": field_of(block, "mime_type", "mimeType"), "data": data}
    if kind == "resource_link":
        link = {"type": kind, "uri": str(block.uri), "name": getattr(block, "name", None)}
        return {**link, "mimeType": field_of(block, "mime_type", "mimeType")}
    if kind == "resource":
        content = resource_content(block.resource)
        out: dict[str, Any] = {"type": kind, "uri": content.uri, "mimeType": content.mime_type}
        if content.text is not None:
            out["text"] = content.text
        elif content.blob is not None:
            out["blob"] = content.blob
        return out
    dumped = block.model_dump(mode="json") if hasattr(block, "model_dump") else {"type": kind}
    return dict(dumped)


def content_text(blocks: Any) -> str:
    return "\n".join(
        getattr(b, "text", "") for b in (blocks or []) if getattr(b, "type", None) == "text"
    ).strip()


def describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe(e) for e in exc.exceptions)
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
