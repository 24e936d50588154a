"""Claude on AWS Bedrock in the Messages shape: ``InvokeModel`` / ``InvokeModelWithResponseStream``.

The request is the Anthropic Messages body (``toolwire.models.anthropic._request``) without ``model`` (it is
in the URL) and ``stream`` (the operation says it), with ``anthropic_version: "bedrock-2023-05-31"`` and the
betas as ``anthropic_beta`` in the body. The streamed answer is AWS event-stream framing whose ``chunk``
events carry each Anthropic stream event, JSON, base64-encoded in ``bytes``
(https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_InvokeModelWithResponseStream.html);
a whole answer (``InvokeModel``) is the Messages response itself. Signing, credentials and the frame
decoding are :class:`~toolwire.models.bedrock.BedrockModel`'s; the events go to the Anthropic parser.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Unpack

from toolwire.models._http import Connection, Exchange, Json, parse_json
from toolwire.models.anthropic._request import build_body
from toolwire.models.anthropic._stream import AnthropicEventParser, events_from_message
from toolwire.models.base import ModelRequest, StreamError
from toolwire.models.bedrock import BedrockModel

if TYPE_CHECKING:
    from botocore.credentials import Credentials
    from botocore.eventstream import EventStreamMessage

BEDROCK_ANTHROPIC_VERSION = "bedrock-2023-05-31"


class BedrockAnthropicModel(BedrockModel):
    """Claude on Bedrock through ``InvokeModelWithResponseStream`` (``InvokeModel`` with ``stream=False``),
    for what only the Messages shape carries (server tools, citations, ``anthropic_beta`` features).

    ``model_id`` is a Bedrock model id or inference profile (``us.anthropic.claude-sonnet-4-5-...``).
    ``max_tokens``, ``thinking``, ``builtin_tools`` and ``betas`` are
    :class:`~toolwire.models.anthropic.AnthropicModel`'s; ``region``, ``credentials`` and the connection
    options :class:`~toolwire.models.bedrock.BedrockModel`'s (SigV4 or a Bedrock API key, AWS hosts only).
    History is Anthropic's: signatures and the ``anthropic`` metadata round-trip with the Messages API.
    """

    provider = "anthropic"
    """Its messages hold Anthropic blocks and signatures, which the Messages API takes back as its own."""

    def __init__(
        self,
        model_id: str,
        *,
        region: str | None = None,
        credentials: Credentials | None = None,
        max_tokens: int = 4096,
        thinking: Mapping[str, Any] | None = None,
        builtin_tools: Sequence[Mapping[str, Any]] = (),
        betas: Sequence[str] = (),
        **connection: Unpack[Connection],
    ) -> None:
        super().__init__(model_id, region=region, credentials=credentials, **connection)
        self.max_tokens = max_tokens
        self.thinking = dict(thinking) if thinking is not None else None
        self.builtin_tools = [dict(t) for t in builtin_tools]
        self.betas = tuple(betas)

    async def _exchange(self, request: ModelRequest) -> Exchange:
        body, warnings = build_body(request, self)
        del body["model"], body["stream"]
        body["anthropic_version"] = BEDROCK_ANTHROPIC_VERSION
        if self.betas:
            body["anthropic_beta"] = list(self.betas)
        operation = "invoke-with-response-stream" if self.stream_enabled else "invoke"
        return await self._signed_exchange(
            body, operation, AnthropicEventParser(model=self.model_name), warnings
        )

    def _whole_events(self, body: Json) -> Iterable[Json | StreamError]:
        return events_from_message(body)

    def _decode(self, message: EventStreamMessage) -> Json | StreamError:
        event = super()._decode(message)
        if not isinstance(event, dict) or event.get("type") != "chunk":
            return event  # an exception frame, or an event type added later (the parser ignores it)
        try:
            data = base64.b64decode(str(event.get("bytes", "")), validate=True)
        except (binascii.Error, ValueError):
            return self._protocol_error(f"chunk bytes are not base64: {str(event.get('bytes'))[:200]!r}")
        inner = parse_json(data)
        if not isinstance(inner, dict):
            return self._protocol_error(f"invalid JSON in a chunk: {data[:200]!r}")
        return inner


__all__ = ["BEDROCK_ANTHROPIC_VERSION", "BedrockAnthropicModel"]
