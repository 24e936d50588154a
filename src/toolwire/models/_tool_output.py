"""Tool outputs that carry media (an MCP tool's content blocks), read once for every wire.

An MCP tool's result is stored as MCP spells its content (``toolwire.tools.mcp``): ``{"type": "text",
"text"}``, ``{"type": "image" | "audio", "mimeType", "data"}`` (base64), ``{"type": "resource", "uri",
"mimeType", "text" | "blob"}`` (an embedded resource) and ``{"type": "resource_link", "uri", "name"}``.
:func:`content_items` reads such a list into :class:`Text` and :class:`Media` items; each adapter turns them
into its own blocks (an image block, a document, a follow-up image message) or, for media its wire cannot
take in a tool result, into the text of :func:`stand_in`. Any other output is not an MCP content list and
is sent as before.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from toolwire.errors import UnsupportedContentError
from toolwire.messages import FilePart

BlockT = TypeVar("BlockT")


@dataclass(frozen=True, slots=True)
class Text:
    text: str


@dataclass(frozen=True, slots=True)
class Media:
    """An image, audio clip or file, inline (base64)."""

    media_type: str
    data: str
    uri: str | None = None
    """The resource it came from (an embedded blob resource)."""

    @property
    def data_url(self) -> str:
        return f"data:{self.media_type};base64,{self.data}"

    def file(self) -> FilePart:
        """As a file part: each wire already spells those for user content."""
        return FilePart(self.media_type, data=self.data, filename=self.name)

    @property
    def name(self) -> str:
        """A file name for wires that want one: the last segment of its URI, else its kind."""
        tail = (self.uri or "").rstrip("/").rsplit("/", 1)[-1]
        return tail or self.media_type.replace("/", ".")


Item = Text | Media


def content_items(output: Any) -> list[Item] | None:
    """The items of an MCP content list that holds media or resources; ``None`` for any other output (plain
    values, text-only lists, a provider's own blocks), which each wire sends as it always did."""
    if not isinstance(output, list) or not output or not all(isinstance(b, dict) for b in output):
        return None
    items = [_item(block) for block in output]
    if any(item is None for item in items) or all(block.get("type") == "text" for block in output):
        return None
    return [item for item in items if item is not None]


def stand_in(media: Media, wire: str) -> Text:
    """What a model reads where its wire cannot take ``media`` in a tool result."""
    source = f" from {media.uri}" if media.uri else ""
    return Text(f"[{media.media_type} attachment{source}: {wire} cannot take it in a tool result]")


def blocks(
    items: list[Item], wire: str, text: Callable[[str], BlockT], media: Callable[[Media], BlockT]
) -> list[BlockT]:
    """Each item as one of the wire's blocks: text through ``text``, media through ``media`` or, where that
    raises :class:`~toolwire.errors.UnsupportedContentError`, as its :func:`stand_in` text."""
    out: list[BlockT] = []
    for item in items:
        if isinstance(item, Text):
            out.append(text(item.text))
            continue
        try:
            out.append(media(item))
        except UnsupportedContentError:
            out.append(text(stand_in(item, wire).text))
    return out


def joined(items: list[Item]) -> str:
    """Text items joined by blank lines (a wire whose tool result is one string)."""
    return "\n\n".join(item.text for item in items if isinstance(item, Text))


def _item(block: dict[str, Any]) -> Item | None:
    match block.get("type"):
        case "text" if isinstance(block.get("text"), str):
            return Text(block["text"])
        case "image" | "audio" if _is_base64(block.get("data")) and isinstance(block.get("mimeType"), str):
            return Media(block["mimeType"], block["data"])
        case "resource" if isinstance(block.get("uri"), str):
            media_type = block.get("mimeType") if isinstance(block.get("mimeType"), str) else None
            if isinstance(block.get("text"), str):
                return Text(f"[resource {block['uri']} ({media_type or 'text'})]\n{block['text']}")
            if _is_base64(block.get("blob")):
                text = _text_of(block["blob"], media_type)
                if text is not None:  # a text file sent as a blob: text on every wire
                    return Text(f"[resource {block['uri']} ({media_type})]\n{text}")
                return Media(media_type or "application/octet-stream", block["blob"], uri=block["uri"])
        case "resource_link" if isinstance(block.get("uri"), str):
            name = block.get("name") if isinstance(block.get("name"), str) else None
            return Text(f"[resource link: {name + ' ' if name else ''}<{block['uri']}>]")
    return None


def _text_of(blob: str, media_type: str | None) -> str | None:
    if media_type is None or not (media_type.startswith("text/") or media_type == "application/json"):
        return None
    try:
        return base64.b64decode(blob).decode("utf-8")
    except UnicodeDecodeError:
        return None


def _is_base64(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


__all__ = ["Item", "Media", "Text", "blocks", "content_items", "joined", "stand_in"]
