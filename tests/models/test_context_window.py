"""Context windows (documented, set, learned) and every adapter's context-length error as
:class:`~toolwire.errors.ContextLengthExceeded`, from each provider's documented error body, replayed at the
network edge (``httpx.MockTransport``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.models.test_bedrock import CREDENTIALS
from toolwire.errors import ContextLengthExceeded, ProviderHTTPError, ProviderProtocolError
from toolwire.messages import Message
from toolwire.models import collect
from toolwire.models.anthropic import AnthropicModel
from toolwire.models.base import Model, ModelRequest
from toolwire.models.bedrock import BedrockModel
from toolwire.models.fallback import FallbackModel
from toolwire.models.gemini import GeminiModel
from toolwire.models.openai_chat import OpenAIChatModel
from toolwire.models.openai_responses import OpenAIResponsesModel
from toolwire.models.scripted import ScriptedModel

REQUEST = ModelRequest(messages=[Message.user("a very long conversation")])


def _answer(status: int, body: Any, headers: dict[str, str] | None = None) -> httpx.AsyncClient:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            status, content=content, headers={"content-type": "application/json", **(headers or {})}
        )

    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


def _chat(client: httpx.AsyncClient, base_url: str = "http://127.0.0.1:8080/v1") -> Model:
    return OpenAIChatModel("served-model", api_key="k", base_url=base_url, http_client=client)


# Each case: a model on a client answering the provider's documented context-length error, and the limit and
# requested counts the error states (None where its wording states none).
CASES: dict[
    str, tuple[Callable[[httpx.AsyncClient], Model], int, Any, dict[str, str], int | None, int | None]
] = {
    # https://platform.openai.com/docs/guides/error-codes (the code) and the message as the API words it.
    "openai-chat": (
        lambda c: OpenAIChatModel("gpt-4o", api_key="k", http_client=c),
        400,
        {
            "error": {
                "message": "This model's maximum context length is 128000 tokens. However, your messages "
                "resulted in 130532 tokens. Please reduce the length of the messages.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        },
        {},
        128000,
        130532,
    ),
    # The Responses API states no numbers.
    "openai-responses": (
        lambda c: OpenAIResponsesModel("gpt-4.1", api_key="k", http_client=c),
        400,
        {
            "error": {
                "message": "Your input exceeds the context window of this model. Please adjust your input and "
                "try again.",
                "type": "invalid_request_error",
                "param": "input",
                "code": "context_length_exceeded",
            }
        },
        {},
        None,
        None,
    ),
    # https://docs.anthropic.com/en/api/errors (invalid_request_error) with its "prompt is too long" message.
    "anthropic": (
        lambda c: AnthropicModel("claude-sonnet-4-5", api_key="k", http_client=c),
        400,
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "prompt is too long: 208310 tokens > 200000 maximum",
            },
        },
        {},
        200000,
        208310,
    ),
    # https://ai.google.dev/gemini-api/docs/troubleshooting (400 INVALID_ARGUMENT) with Gemini's wording.
    "gemini": (
        lambda c: GeminiModel("gemini-2.5-flash", api_key="k", http_client=c),
        400,
        {
            "error": {
                "code": 400,
                "message": "The input token count (1196351) exceeds the maximum number of tokens allowed "
                "(1048576).",
                "status": "INVALID_ARGUMENT",
            }
        },
        {},
        1048576,
        1196351,
    ),
    # https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html (ValidationException,
    # the type in the x-amzn-errortype header).
    "bedrock": (
        lambda c: BedrockModel(
            "amazon.nova-pro-v1:0", region="us-east-1", credentials=CREDENTIALS, http_client=c
        ),
        400,
        {"message": "Input is too long for requested model."},
        {"x-amzn-errortype": "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/"},
        None,
        None,
    ),
    # Claude on Bedrock passes Anthropic's wording through the ValidationException.
    "bedrock-claude": (
        lambda c: BedrockModel(
            "anthropic.claude-sonnet-4-5-20250929-v1:0",
            region="us-east-1",
            credentials=CREDENTIALS,
            http_client=c,
        ),
        400,
        {
            "message": "The model returned the following errors: prompt is too long: 201234 tokens > 200000 maximum"
        },
        {"x-amzn-errortype": "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/"},
        200000,
        201234,
    ),
    # llama.cpp's llama-server (tools/server/server.cpp, ERROR_TYPE_EXCEED_CONTEXT_SIZE): the numbers also
    # stand beside the message.
    "llamacpp": (
        _chat,
        400,
        {
            "error": {
                "code": 400,
                "message": "request (4476 tokens) exceeds the available context size (4096 tokens)",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": 4476,
                "n_ctx": 4096,
            }
        },
        {},
        4096,
        4476,
    ),
    # Ollama's wording (its OpenAI-compatible error shape), without numbers.
    "ollama": (
        lambda c: _chat(c, "http://localhost:11434/v1"),
        400,
        {
            "error": {
                "message": "the input length exceeds the context length",
                "type": "invalid_request_error",
            }
        },
        {},
        None,
        None,
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
async def test_each_providers_context_length_error_is_typed(case: str) -> None:
    build, status, body, headers, limit, requested = CASES[case]
    model = build(_answer(status, body, headers))
    with pytest.raises(ContextLengthExceeded) as raised:
        await collect(model, REQUEST)
    error = raised.value
    assert isinstance(error, ProviderHTTPError) and error.status == status and not error.retryable
    assert (error.limit, error.requested) == (limit, requested)


async def test_an_error_that_is_not_about_length_stays_what_it_was() -> None:
    throttled = {"message": "Too many tokens, please wait before trying again."}
    model = BedrockModel(
        "amazon.nova-pro-v1:0",
        region="us-east-1",
        credentials=CREDENTIALS,
        http_client=_answer(429, throttled, {"x-amzn-errortype": "ThrottlingException"}),
    )
    with pytest.raises(ProviderHTTPError) as raised:
        await collect(model, REQUEST)
    assert not isinstance(raised.value, ContextLengthExceeded) and raised.value.retryable


async def test_an_error_event_inside_the_stream_is_typed_too() -> None:
    frames = (
        b'event: response.failed\ndata: {"type": "response.failed", "response": {"status": "failed", "error": '
        b'{"code": "context_length_exceeded", "message": "Your input exceeds the context window of this '
        b'model."}}}\n\n'
    )

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=frames, headers={"content-type": "text/event-stream"})

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    model = OpenAIResponsesModel("gpt-4.1", api_key="k", http_client=client)
    with pytest.raises(ContextLengthExceeded) as raised:
        await collect(model, REQUEST)
    assert raised.value.status is None and raised.value.code == "context_length_exceeded"
    assert not isinstance(raised.value, ProviderProtocolError)


# -- windows: documented, set, learned ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "window", "output"),
    [
        ("gpt-4o-mini-2024-07-18", 128_000, 16_384),
        ("gpt-4.1", 1_047_576, 32_768),
        ("o3-mini", 200_000, 100_000),
        ("claude-sonnet-4-5-20250929", 200_000, 64_000),
        ("us.anthropic.claude-3-5-haiku-20241022-v1:0", 200_000, 8_192),
        ("claude-opus-4-1@20250805", 200_000, 32_000),
        ("gemini-2.5-flash-lite", 1_048_576, 65_536),
        ("models/gemini-2.0-flash", 1_048_576, 8_192),
        ("deepseek-reasoner", 128_000, 64_000),
        ("openai/gpt-oss-120b", 131_072, 131_072),
    ],
)
def test_a_model_knows_its_documented_window(name: str, window: int, output: int) -> None:
    model = OpenAIChatModel(name, api_key="k", base_url="http://127.0.0.1:9/v1")
    assert (model.context_window, model.max_output_tokens) == (window, output)


def test_an_unknown_model_has_no_window_until_told() -> None:
    assert (
        OpenAIChatModel("my-finetune", api_key="k", base_url="http://127.0.0.1:9/v1").context_window is None
    )
    assert OpenAIChatModel("gpt-4", api_key="k", base_url="http://127.0.0.1:9/v1").context_window == 8_192
    assert (
        OpenAIChatModel("gpt-4o", api_key="k", context_window=64_000, max_output_tokens=1_000).context_window
        == 64_000
    )
    scripted = ScriptedModel([])
    scripted.context_window = 2_048  # any model, not only HTTP ones
    assert scripted.context_window == 2_048
    assert FallbackModel(scripted, ScriptedModel([]), breaker=None).context_window == 2_048


async def test_a_server_teaches_its_window_to_every_model_of_its_endpoint() -> None:
    _, status, body, headers, limit, _ = CASES["llamacpp"]
    url = "http://127.0.0.1:8089/v1"
    first = _chat(_answer(status, body, headers), url)
    assert first.context_window is None
    with pytest.raises(ContextLengthExceeded):
        await collect(first, REQUEST)
    later = _chat(_answer(200, {}), url)  # another run's model object, same server
    assert first.context_window == later.context_window == limit
    assert _chat(_answer(200, {}), "http://127.0.0.1:8090/v1").context_window is None  # another server


async def test_a_context_length_error_fails_over_to_a_fallback_with_a_larger_window() -> None:
    """Without ``larger_context``, a request too long for the primary goes to the remaining models known to
    hold more than the window the error states, not to one of the same size."""
    _, status, body, headers, _, _ = CASES["openai-chat"]
    answered: list[str] = []

    def good(name: str) -> httpx.AsyncClient:
        def handler(request: httpx.Request) -> httpx.Response:
            answered.append(name)
            return httpx.Response(
                200,
                json={
                    "id": "r",
                    "model": name,
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": "ok"},
                            "finish_reason": "stop",
                        }
                    ],
                },
            )

        return httpx.AsyncClient(transport=httpx.MockTransport(handler))

    primary = OpenAIChatModel("gpt-4o", api_key="k", http_client=_answer(status, body, headers), stream=False)
    same = OpenAIChatModel("gpt-4o-2024-08-06", api_key="k", http_client=good("same"), stream=False)
    larger = OpenAIChatModel("gpt-4.1", api_key="k", http_client=good("larger"), stream=False)
    response = await collect(FallbackModel(primary, same, larger, breaker=None), REQUEST)
    assert response.text == "ok" and answered == ["larger"]
