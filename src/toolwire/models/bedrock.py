"""AWS Bedrock Converse / ConverseStream adapter over httpx.

botocore does the AWS parts: SigV4 signing (``SigV4Auth``) and the binary
``application/vnd.amazon.eventstream`` framing with its CRCs (``EventStreamBuffer``). Request translation
lives in ``_bedrock_request.py`` and event parsing in ``_bedrock_stream.py``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any
from urllib.parse import quote

import httpx

from toolwire.errors import ConfigError, ProviderProtocolError
from toolwire.models._bedrock_request import build_body
from toolwire.models._bedrock_stream import BedrockEventParser, Event, events_from_response
from toolwire.models._http import make_client, open_stream
from toolwire.models._keys import from_environment, is_own_host, url_host
from toolwire.models.base import (
    Model,
    ModelRequest,
    ModelStreamPart,
    ResponseMetadata,
    StreamError,
    StreamStart,
)

try:
    import botocore.session
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials, RefreshableCredentials
    from botocore.eventstream import EventStreamBuffer, EventStreamMessage, ParserError
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ConfigError("BedrockModel needs botocore: pip install 'toolwire[bedrock]'") from exc

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


TOKEN_VARIABLE = "AWS_BEARER_TOKEN_BEDROCK"


def _is_aws_host(host: str) -> bool:
    return host.endswith((".amazonaws.com", ".amazonaws.com.cn", ".api.aws"))


def _missing_credentials(base_url: str, aws: bool) -> str:
    if aws:
        return (
            f"no AWS credentials: pass credentials= or api_key=, configure the AWS default chain or set "
            f"{TOKEN_VARIABLE}"
        )
    return (
        f"no credentials for {url_host(base_url) or base_url!r}: the AWS default chain and {TOKEN_VARIABLE} "
        "are only used with AWS hosts; pass credentials= or api_key="
    )


class BedrockModel(Model):
    """A model on AWS Bedrock through the Converse API.

    Credentials come from botocore's default chain unless given; ``api_key`` (or
    ``AWS_BEARER_TOKEN_BEDROCK``) switches to Bedrock API-key auth instead of SigV4. Credentials from the
    environment (the chain, the token variable) are only used with AWS hosts (https ``*.amazonaws.com``,
    ``*.api.aws``): another ``base_url`` needs ``credentials=`` or ``api_key=``. Missing credentials are a
    :class:`~toolwire.errors.ConfigError` here, when the model is built. ``thinking`` and
    ``additional_model_request_fields`` go in ``additionalModelRequestFields``.
    """

    provider = "bedrock"

    def __init__(
        self,
        model_id: str,
        *,
        region: str | None = None,
        http_client: httpx.AsyncClient | None = None,
        stream: bool = True,
        credentials: Credentials | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        max_tokens: int | None = None,
        thinking: Mapping[str, Any] | None = None,
        additional_model_request_fields: Mapping[str, Any] | None = None,
    ) -> None:
        self.model_name = model_id
        session = botocore.session.get_session()
        self.region = region or session.get_config_variable("region") or "us-east-1"
        self.base_url = (base_url or f"https://bedrock-runtime.{self.region}.amazonaws.com").rstrip("/")
        # Credentials from the environment (the bearer token, botocore's default chain) are AWS's: they
        # sign or authorise requests to AWS hosts only. Another base URL gets what was passed explicitly.
        aws = is_own_host(self.base_url, _is_aws_host)
        if api_key is None and aws:
            api_key = from_environment((TOKEN_VARIABLE,))
        self.api_key = api_key
        if credentials is None and aws and not api_key:
            credentials = session.get_credentials()
        if credentials is None and not api_key:
            raise ConfigError(_missing_credentials(self.base_url, aws))
        self.credentials = credentials
        self.stream_enabled = stream
        self.max_tokens = max_tokens
        self.additional_fields = dict(additional_model_request_fields or {})
        if thinking is not None:
            self.additional_fields["thinking"] = dict(thinking)
        self._client, self._owns_client = make_client(http_client)

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()

    def _url(self) -> str:
        # Model ids and ARNs contain ':' and '/', which must be percent-encoded in the path.
        operation = "converse-stream" if self.stream_enabled else "converse"
        return f"{self.base_url}/model/{quote(self.model_name, safe='')}/{operation}"

    async def _signed_headers(self, url: str, body: bytes) -> dict[str, str]:
        accept = "application/vnd.amazon.eventstream" if self.stream_enabled else "application/json"
        headers = {"content-type": "application/json", "accept": accept}
        if self.api_key:
            return {**headers, "authorization": f"Bearer {self.api_key}"}
        credentials = self.credentials
        if credentials is None:  # cleared after the model was built
            raise ConfigError(_missing_credentials(self.base_url, aws=True))
        # Refreshing may call STS or the instance metadata service: keep that off the event loop.
        frozen = (
            await asyncio.to_thread(credentials.get_frozen_credentials)
            if isinstance(credentials, RefreshableCredentials)
            else credentials.get_frozen_credentials()
        )
        aws_request = AWSRequest(method="POST", url=url, data=body, headers=headers)
        SigV4Auth(frozen, "bedrock", self.region).add_auth(aws_request)
        return dict(aws_request.headers.items())

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamPart]:
        body, warnings = build_body(
            request, max_tokens=self.max_tokens, additional_fields=self.additional_fields
        )
        content = json.dumps(body, ensure_ascii=False).encode()
        url = self._url()
        headers = await self._signed_headers(url, content)
        parser = BedrockEventParser()
        async with open_stream(
            self._client,
            "POST",
            url,
            provider=self.provider,
            model=self.model_name,
            content=content,
            headers=headers,
        ) as response:
            yield StreamStart(warnings=tuple(warnings))
            yield ResponseMetadata(
                response_id=response.headers.get("x-amzn-requestid"), model=self.model_name
            )
            events = self._stream_events(response) if self.stream_enabled else self._whole_events(response)
            async for event in events:
                if isinstance(event, StreamError):
                    yield event
                    return
                for part in parser.feed(*event):
                    yield part
        finish = parser.finish()
        if finish is None:
            yield self._protocol_error("the response ended before messageStop")
            return
        for part in finish:
            yield part

    async def _stream_events(self, response: httpx.Response) -> AsyncIterator[Event | StreamError]:
        buffer = EventStreamBuffer()
        async for chunk in response.aiter_bytes():
            buffer.add_data(chunk)
            while True:  # every frame this chunk completed; botocore checks both CRCs
                try:
                    message = next(buffer)
                except StopIteration:
                    break
                except ParserError as exc:
                    yield self._protocol_error(f"corrupt event stream frame: {exc}")
                    return
                yield self._decode(message)

    def _decode(self, message: EventStreamMessage) -> Event | StreamError:
        headers = message.headers
        try:
            payload = json.loads(message.payload) if message.payload else {}
        except ValueError:
            return self._protocol_error(f"invalid JSON in event stream frame: {message.payload[:200]!r}")
        match headers.get(":message-type"):
            case "event":
                return str(headers.get(":event-type", "")), payload
            case "exception":
                kind = str(headers.get(":exception-type", "exception"))
                return self._stream_exception(kind, str(payload.get("message") or kind), payload)
            case _:  # "error"
                code = str(headers.get(":error-code", "error"))
                return self._stream_exception(code, str(headers.get(":error-message") or code), payload)

    async def _whole_events(self, response: httpx.Response) -> AsyncIterator[Event | StreamError]:
        content = await response.aread()
        try:
            data = json.loads(content)
        except ValueError:
            yield self._protocol_error(f"invalid JSON response: {content[:200]!r}")
            return
        if not isinstance(data, dict):
            yield self._protocol_error("the response is not a JSON object")
            return
        for event in events_from_response(data):
            yield event

    def _stream_exception(self, code: str, message: str, body: Any) -> StreamError:
        return StreamError(
            error=ProviderProtocolError(
                message,
                provider=self.provider,
                model=self.model_name,
                code=code,
                retryable=code.lower() in _RETRYABLE_EXCEPTIONS,
                body=body,
            )
        )

    def _protocol_error(self, message: str) -> StreamError:
        return StreamError(
            error=ProviderProtocolError(message, provider=self.provider, model=self.model_name)
        )


__all__ = ["BedrockModel"]
