"""AWS Bedrock Converse / ConverseStream adapter over httpx.

botocore does the AWS parts: SigV4 signing (``SigV4Auth``) and the binary
``application/vnd.amazon.eventstream`` framing with its CRCs (``EventStreamBuffer``). Request translation
lives in ``_request.py`` and event parsing in ``_stream.py``; the HTTP exchange is
:class:`~toolwire.models._http.HTTPModel`'s.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Iterable, Mapping, Sequence
from typing import Any, Unpack
from urllib.parse import quote

import httpx

from toolwire.errors import MissingExtraError, ProviderProtocolError
from toolwire.models._http import Connection, Exchange, HTTPModel, Json, WireParser
from toolwire.models._providers import aws_api_key, is_aws_url, missing_aws_credentials
from toolwire.models._window import as_context_length
from toolwire.models.base import ModelRequest, ResponseMetadata, StreamError
from toolwire.models.bedrock._request import build_body
from toolwire.models.bedrock._stream import PROVIDER, BedrockEventParser, events_from_response

try:
    import botocore.session
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials, RefreshableCredentials
    from botocore.eventstream import EventStreamBuffer, EventStreamMessage, ParserError
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise MissingExtraError("bedrock", "BedrockModel", missing=exc.name) from exc

# Exception types ConverseStream documents as transient.
_RETRYABLE_EXCEPTIONS = frozenset(
    {
        "throttlingexception",
        "internalserverexception",
        "serviceunavailableexception",
        "modelstreamerrorexception",
        "modelnotreadyexception",
    }
)


class BedrockModel(HTTPModel):
    """A model on AWS Bedrock through the Converse API.

    Credentials come from botocore's default chain unless given; ``api_key`` (or
    ``AWS_BEARER_TOKEN_BEDROCK``) switches to Bedrock API-key auth instead of SigV4. Credentials from the
    environment (the chain, the token variable) are only used with AWS hosts (https ``*.amazonaws.com``,
    ``*.api.aws``): another ``base_url`` needs ``credentials=`` or ``api_key=``. Missing credentials are a
    :class:`~toolwire.errors.ConfigError` here, when the model is built. ``thinking`` and
    ``additional_model_request_fields`` go in ``additionalModelRequestFields``. The other options are
    :class:`~toolwire.models._http.HTTPModel`'s.
    """

    provider = PROVIDER
    otel_provider_name = "aws.bedrock"
    _sse_body = False  # AWS event stream (an Anthropic parser on InvokeModel)

    def __init__(
        self,
        model_id: str,
        *,
        region: str | None = None,
        credentials: Credentials | None = None,
        max_tokens: int | None = None,
        thinking: Mapping[str, Any] | None = None,
        additional_model_request_fields: Mapping[str, Any] | None = None,
        **connection: Unpack[Connection],
    ) -> None:
        # Read by _credentials() during super().__init__().
        self._session = botocore.session.get_session()
        self.region = region or self._session.get_config_variable("region") or "us-east-1"
        self.credentials = credentials
        super().__init__(model_id, **connection)
        self.max_tokens = max_tokens
        self.additional_fields = dict(additional_model_request_fields or {})
        if thinking is not None:
            self.additional_fields["thinking"] = dict(thinking)

    def _credentials(self, api_key: str | None, base_url: str | None) -> tuple[str, str | None]:
        base_url = (base_url or f"https://bedrock-runtime.{self.region}.amazonaws.com").rstrip("/")
        api_key = aws_api_key(api_key, base_url)
        # botocore's default chain holds AWS credentials: it signs requests to AWS hosts only.
        if self.credentials is None and not api_key and is_aws_url(base_url):
            self.credentials = self._session.get_credentials()
        if self.credentials is None and not api_key:
            raise missing_aws_credentials(base_url)
        return base_url, api_key

    async def _exchange(self, request: ModelRequest) -> Exchange:
        body, warnings = build_body(
            request,
            model_id=self.model_name,
            max_tokens=self.max_tokens,
            additional_fields=self.additional_fields,
        )
        operation = "converse-stream" if self.stream_enabled else "converse"
        return await self._signed_exchange(
            body, operation, BedrockEventParser(model=self.model_name), warnings
        )

    async def _signed_exchange(
        self, body: Json, operation: str, parser: WireParser, warnings: Sequence[str]
    ) -> Exchange:
        """``POST /model/{model}/{operation}`` with ``body``, signed (or with the Bedrock API key)."""
        content = json.dumps(body, ensure_ascii=False).encode()
        # Model ids and ARNs contain ':' and '/', which must be percent-encoded in the path.
        url = f"{self.base_url}/model/{quote(self.model_name, safe='')}/{operation}"
        return Exchange(
            url=url,
            headers=await self._signed_headers(url, content),
            body=content,
            parser=parser,
            warnings=warnings,
        )

    async def _signed_headers(self, url: str, body: bytes) -> dict[str, str]:
        accept = "application/vnd.amazon.eventstream" if self.stream_enabled else "application/json"
        headers = {"content-type": "application/json", "accept": accept, **self.extra_headers}
        if self.api_key:
            return {**headers, "authorization": f"Bearer {self.api_key}"}
        credentials = self.credentials
        if credentials is None:  # cleared after the model was built
            raise missing_aws_credentials(self.base_url)
        # Refreshing may call STS or the instance metadata service: keep that off the event loop.
        frozen = (
            await asyncio.to_thread(credentials.get_frozen_credentials)
            if isinstance(credentials, RefreshableCredentials)
            else credentials.get_frozen_credentials()
        )
        aws_request = AWSRequest(method="POST", url=url, data=body, headers=headers)
        SigV4Auth(frozen, "bedrock", self.region).add_auth(aws_request)
        return dict(aws_request.headers.items())

    def _response_metadata(self, response: httpx.Response) -> ResponseMetadata:
        return ResponseMetadata(response_id=response.headers.get("x-amzn-requestid"), model=self.model_name)

    def _whole_events(self, body: Json) -> Iterable[Json | StreamError]:
        return events_from_response(body)

    async def _stream_batches(
        self, response: httpx.Response
    ) -> AsyncGenerator[list[Json | StreamError], None]:
        buffer = EventStreamBuffer()
        async for chunk in response.aiter_bytes():
            buffer.add_data(chunk)
            batch: list[Json | StreamError] = []
            while True:  # every frame this chunk completed; botocore checks both CRCs
                try:
                    message = next(buffer)
                except StopIteration:
                    break
                except ParserError as exc:
                    batch.append(self._protocol_error(f"corrupt event stream frame: {exc}"))
                    yield batch
                    return
                batch.append(self._decode(message))
            if batch:
                yield batch

    def _decode(self, message: EventStreamMessage) -> Json | StreamError:
        headers = message.headers
        try:
            payload = json.loads(message.payload) if message.payload else {}
        except ValueError:
            return self._protocol_error(f"invalid JSON in event stream frame: {message.payload[:200]!r}")
        match headers.get(":message-type"):
            case "event":
                return {**payload, "type": str(headers.get(":event-type", ""))}
            case "exception":
                kind = str(headers.get(":exception-type", "exception"))
                return self._stream_exception(kind, str(payload.get("message") or kind), payload)
            case _:  # "error"
                code = str(headers.get(":error-code", "error"))
                return self._stream_exception(code, str(headers.get(":error-message") or code), payload)

    def _stream_exception(self, code: str, message: str, body: Any) -> StreamError:
        return StreamError(
            error=as_context_length(
                ProviderProtocolError(
                    message,
                    provider=self.provider,
                    model=self.model_name,
                    code=code,
                    retryable=code.lower() in _RETRYABLE_EXCEPTIONS,
                    body=body,
                )
            )
        )


__all__ = ["BedrockModel"]
