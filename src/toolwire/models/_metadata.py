"""Provider metadata that history carries back into requests, and the filter for metadata from clients.

Each adapter's request builder reads history metadata only through :func:`read_back` with its own entry of
the table below (provider namespace -> the keys it reads back), so the table is complete by construction: a
key an adapter does not declare, it never sees. The table lives here, not in the adapters, so that this
module stays a leaf of the import graph.

:func:`client_metadata_filter` applies the union of those declarations to metadata that came from an HTTP
client (``toolwire.server.ui_messages``): unknown namespaces and keys are dropped, and so is any value that
is not JSON or is larger than :data:`MAX_VALUE_BYTES`. What survives is data: each adapter puts a value it
reads back only in a value position of the request it builds, after checking its type, and never uses one
as a field name, URL, header or option (see the request builders).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, TypeAlias

from toolwire.messages import ProviderMetadata

RoundTrip: TypeAlias = Mapping[str, frozenset[str]]
"""Provider namespace -> keys read back from history."""

MAX_VALUE_BYTES = 64 * 1024
"""Largest value (UTF-8 JSON) kept from a client: signatures and encrypted reasoning are a few KiB."""


def read_back(metadata: ProviderMetadata, declared: RoundTrip, namespace: str) -> dict[str, Any]:
    """The keys ``declared`` for ``namespace`` in a part's metadata: all a request builder may read."""
    own = metadata.get(namespace)
    keys = declared.get(namespace, frozenset())
    if not isinstance(own, dict) or not keys:
        return {}
    return {key: value for key, value in own.items() if key in keys}


OPENAI_CHAT: RoundTrip = {"openai": frozenset({"reasoning_field", "extra_content", "message_extra_content"})}
"""Chat Completions: the reasoning field a compatible server used, and Gemini's ``extra_content`` echoes."""

OPENAI_RESPONSES: RoundTrip = {
    "openai": frozenset(
        {"item_id", "item_type", "encrypted_content", "phase", "annotations", "content_type", "server_label"}
    ),
}
"""Responses: item ids and types, encrypted reasoning, reasoning given as text rather than summary
(``content_type``), message phase and annotations, an MCP call's server label."""

OPENAI_RESPONSES_FROM_MODEL: RoundTrip = {"openai": frozenset({"unknown_item_type"})}
"""Responses: the type of an output item toolwire does not model (``tool_search_call``, ...), kept so the
item goes back to Responses as received. Read back from history only: it is not in
:data:`ROUND_TRIP_METADATA`, so metadata from a client can never name an item type."""

ANTHROPIC: RoundTrip = {
    "anthropic": frozenset(
        {"type", "caller", "server_name", "content", "is_error", "citations", "container"}
    ),
}
"""Messages: tool_use / server_tool_use / mcp_tool_use fields toolwire does not model, echoed back (the
``caller`` of a programmatic call included), a server tool result block (its type, content and error flag)
replayed in the assistant turn, a text block's citations, and the code execution ``container`` a programmatic
call came from (named again in the request answering it). Thinking signatures are not metadata: they
live on ReasoningPart."""

GEMINI: RoundTrip = {"google": frozenset({"thoughtSignature"})}
"""Gemini: the thought signature of a part (a function call's above all)."""

BEDROCK: RoundTrip = {}
"""Converse: nothing; reasoning signatures live on ReasoningPart."""

ROUND_TRIP_METADATA: RoundTrip = MappingProxyType(
    {
        namespace: functools.reduce(
            frozenset.union,
            (
                table[namespace]
                for table in (OPENAI_CHAT, OPENAI_RESPONSES, ANTHROPIC, GEMINI, BEDROCK)
                if namespace in table
            ),
            frozenset(),
        )
        for namespace in ("openai", "anthropic", "google")
    }
)
"""The union of every adapter's table: what a client may send back."""


def round_trip_metadata() -> RoundTrip:
    """The union of every adapter's table (:data:`ROUND_TRIP_METADATA`)."""
    return ROUND_TRIP_METADATA


def client_metadata_filter(metadata: Any) -> ProviderMetadata:
    """Only the round-tripped keys of ``metadata`` (sent by a client), with bounded JSON values."""
    if not isinstance(metadata, dict):
        return {}
    declared = round_trip_metadata()
    out: ProviderMetadata = {}
    for namespace, values in metadata.items():
        keys = declared.get(namespace)
        if keys is None or not isinstance(values, dict):
            continue
        kept = {key: value for key, value in values.items() if key in keys and _bounded_json(value)}
        if kept:
            out[namespace] = kept
    return out


def _bounded_json(value: Any) -> bool:
    try:
        # surrogatepass: a lone surrogate from an escaped client string is measured, not an error.
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
        return len(text.encode("utf-8", "surrogatepass")) <= MAX_VALUE_BYTES
    except (TypeError, ValueError, RecursionError):
        return False


__all__ = [
    "ANTHROPIC",
    "BEDROCK",
    "GEMINI",
    "MAX_VALUE_BYTES",
    "OPENAI_CHAT",
    "OPENAI_RESPONSES",
    "OPENAI_RESPONSES_FROM_MODEL",
    "ROUND_TRIP_METADATA",
    "RoundTrip",
    "client_metadata_filter",
    "read_back",
    "round_trip_metadata",
]
