"""Provider metadata that history carries back into requests, and the filter for metadata from clients.

Each adapter module declares ``ROUND_TRIP_METADATA`` (provider namespace -> the keys its request builder
reads back from history) and reads history metadata only through :func:`read_back`, so the declaration is
complete by construction: a key an adapter does not declare, it never sees.

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


@functools.cache
def round_trip_metadata() -> RoundTrip:
    """The union of every adapter's ``ROUND_TRIP_METADATA``."""
    # Imported here: the adapters import this module for read_back.
    from toolwire.models import (
        _anthropic_request,
        _bedrock_request,
        _gemini_request,
        openai_chat,
        openai_responses,
    )

    merged: dict[str, frozenset[str]] = {}
    for module in (openai_chat, openai_responses, _anthropic_request, _gemini_request, _bedrock_request):
        for namespace, keys in module.ROUND_TRIP_METADATA.items():
            merged[namespace] = merged.get(namespace, frozenset()) | keys
    return MappingProxyType(merged)


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


__all__ = ["MAX_VALUE_BYTES", "RoundTrip", "client_metadata_filter", "read_back", "round_trip_metadata"]
