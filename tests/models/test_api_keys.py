"""API keys go only where they belong.

The rule (see ``infer_model``): a key read from a provider's environment variable is only sent to that
provider's own host over https; any other base URL needs an explicit ``api_key=`` (or, for
OpenAI-compatible servers, ``OPENAI_COMPATIBLE_API_KEY``), except loopback servers, which may run without
one. A missing key is a :class:`ConfigError` when the model is built, before a request or a store exists.
Each test checks the headers of the request the adapter really sends, through an httpx.MockTransport.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from botocore.credentials import Credentials

import toolwire
from toolwire.errors import ConfigError, ProviderHTTPError
from toolwire.messages import Message
from toolwire.models import (
    _http,  # make_client: every HTTP adapter's client factory
    infer_model,
)
from toolwire.models._builder import collect
from toolwire.models.anthropic import AnthropicModel
from toolwire.models.base import Model, ModelRequest
from toolwire.models.bedrock import BedrockModel
from toolwire.models.gemini import GeminiModel
from toolwire.models.openai_chat import OpenAIChatModel
from toolwire.models.openai_responses import OpenAIResponsesModel

KEY_VARIABLES = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_COMPATIBLE_API_KEY",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GOOGLE_ACCESS_TOKEN",
    "GOOGLE_CLOUD_PROJECT",
    "GOOGLE_CLOUD_LOCATION",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_BEARER_TOKEN_BEDROCK",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
)
NOT_OPENAI = [
    "https://llm.example.com/v1",
    "http://api.openai.com/v1",  # the right host, but the key would travel in clear text
    "https://api.openai.com.example.com/v1",
    "https://example.com/api.openai.com/v1",
]
LOOPBACK = ["http://127.0.0.1:11434/v1", "http://localhost:8080/v1", "http://[::1]:8000/v1"]


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in KEY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    # botocore's default chain must find nothing unless a test sets it up.
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def capturing_client(sent: list[httpx.Request]) -> httpx.AsyncClient:
    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(400, json={"error": {"message": "captured", "code": "captured"}})

    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


def mock_client() -> tuple[httpx.AsyncClient, list[httpx.Request]]:
    sent: list[httpx.Request] = []
    return capturing_client(sent), sent


async def send(model: Model, sent: list[httpx.Request]) -> httpx.Request:
    """The one request ``model`` sends for a one-message turn (the mock answers it with a 400)."""
    with pytest.raises(ProviderHTTPError):
        await collect(model, ModelRequest(messages=[Message.user("hi")]))
    assert len(sent) == 1
    return sent[0]


async def first_request(build: Callable[[httpx.AsyncClient], Model]) -> httpx.Request:
    client, sent = mock_client()
    return await send(build(client), sent)


def inject_client(monkeypatch: pytest.MonkeyPatch) -> list[httpx.Request]:
    """Make the models ``infer_model`` builds use a capturing client (it takes no client argument)."""
    client, sent = mock_client()
    monkeypatch.setattr(_http, "make_client", lambda http_client: (http_client or client, False))
    return sent


# ---------------------------------------------------------------------------------------------
# OpenAI and OpenAI-compatible servers


async def test_openai_key_goes_to_openai(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    sent = inject_client(monkeypatch)
    request = await send(infer_model("openai:gpt-4o"), sent)
    assert request.url.host == "api.openai.com"
    assert request.headers["authorization"] == "Bearer sk-env"


@pytest.mark.parametrize("url", NOT_OPENAI)
def test_openai_key_is_never_sent_to_a_compatible_server(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    with pytest.raises(ConfigError, match="OPENAI_COMPATIBLE_API_KEY"):
        infer_model(f"openai-compatible:llama3@{url}")
    for model in (OpenAIChatModel, OpenAIResponsesModel):
        with pytest.raises(ConfigError):
            model("m", base_url=url)


async def test_compatible_server_gets_its_own_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", "compatible-key")
    sent = inject_client(monkeypatch)
    request = await send(infer_model("openai-compatible:llama3@https://llm.example.com/v1"), sent)
    assert request.url.host == "llm.example.com"
    assert request.headers["authorization"] == "Bearer compatible-key"
    # ...and that variable never reaches OpenAI itself.
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        infer_model("openai:gpt-4o")


@pytest.mark.parametrize("url", LOOPBACK)
async def test_loopback_server_runs_without_a_key(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    sent = inject_client(monkeypatch)
    request = await send(infer_model(f"openai-compatible:llama3@{url}"), sent)
    assert "authorization" not in request.headers


async def test_openai_base_url_variable_does_not_take_the_openai_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    monkeypatch.setenv("OPENAI_BASE_URL", "https://proxy.example.com/v1")
    for model in (OpenAIChatModel, OpenAIResponsesModel):
        with pytest.raises(ConfigError):
            model("gpt-4o")
    request = await first_request(lambda c: OpenAIChatModel("gpt-4o", api_key="proxy-key", http_client=c))
    assert (request.url.host, request.headers["authorization"]) == ("proxy.example.com", "Bearer proxy-key")


async def test_explicit_key_goes_where_it_is_told() -> None:
    url = "https://llm.example.com/v1"
    request = await first_request(
        lambda c: OpenAIChatModel("m", base_url=url, api_key="given", http_client=c)
    )
    assert request.headers["authorization"] == "Bearer given"
    request = await first_request(
        lambda c: OpenAIResponsesModel("m", base_url=url, api_key="given", http_client=c)
    )
    assert request.headers["authorization"] == "Bearer given"
    # api_key="" states that this server takes no key.
    request = await first_request(lambda c: OpenAIChatModel("m", base_url=url, api_key="", http_client=c))
    assert "authorization" not in request.headers


def test_missing_openai_key_fails_when_the_model_is_built() -> None:
    for model in (OpenAIChatModel, OpenAIResponsesModel):
        with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
            model("gpt-4o")
        with pytest.raises(ConfigError):
            model("gpt-4o", api_key="")  # OpenAI always needs one


def test_missing_key_fails_before_anything_is_stored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    db = tmp_path / "toolwire.db"
    # The agent is built (a module defining it must import without the key); its first run is refused.
    agent = toolwire.Agent(
        "openai-compatible:llama3@https://llm.example.com/v1", store=f"sqlite+aiosqlite:///{db}"
    )
    with pytest.raises(ConfigError, match="OPENAI_COMPATIBLE_API_KEY"):
        agent.run_sync("hi")
    assert not db.exists()


def test_compatible_spec_needs_an_http_url() -> None:
    for spec in ("openai-compatible:m@llm.example.com", "openai-compatible:m@ftp://llm.example.com"):
        with pytest.raises(ConfigError):
            infer_model(spec)


# ---------------------------------------------------------------------------------------------
# Anthropic


async def test_anthropic_key_goes_to_anthropic_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "ak-env")
    request = await first_request(lambda c: AnthropicModel("m", http_client=c))
    assert (request.url.host, request.headers["x-api-key"]) == ("api.anthropic.com", "ak-env")
    with pytest.raises(ConfigError, match="api_key"):
        AnthropicModel("m", base_url="https://gateway.example.com")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "https://gateway.example.com")
    with pytest.raises(ConfigError, match="api_key"):
        AnthropicModel("m")
    request = await first_request(lambda c: AnthropicModel("m", api_key="gateway-key", http_client=c))
    assert (request.url.host, request.headers["x-api-key"]) == ("gateway.example.com", "gateway-key")


def test_missing_anthropic_key_fails_when_the_model_is_built() -> None:
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        AnthropicModel("m")


# ---------------------------------------------------------------------------------------------
# Gemini API and Vertex AI


async def test_gemini_key_goes_to_google_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "gk-env")
    request = await first_request(lambda c: GeminiModel("m", http_client=c))
    assert request.url.host == "generativelanguage.googleapis.com"
    assert request.headers["x-goog-api-key"] == "gk-env"
    with pytest.raises(ConfigError, match="api_key"):
        GeminiModel("m", base_url="https://proxy.example.com/v1beta")
    request = await first_request(
        lambda c: GeminiModel(
            "m", base_url="https://proxy.example.com/v1beta", api_key="given", http_client=c
        )
    )
    assert (request.url.host, request.headers["x-goog-api-key"]) == ("proxy.example.com", "given")


async def test_vertex_token_goes_to_google_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_ACCESS_TOKEN", "ya29-env")
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "proj")
    request = await first_request(
        lambda c: GeminiModel("m", vertex=True, location="us-central1", http_client=c)
    )
    assert request.url.host == "us-central1-aiplatform.googleapis.com"
    assert request.headers["authorization"] == "Bearer ya29-env"
    with pytest.raises(ConfigError):
        GeminiModel("m", vertex=True, base_url="https://proxy.example.com/v1")
    # The location becomes part of the host name: one that would change the host is refused.
    with pytest.raises(ConfigError, match="location"):
        GeminiModel("m", vertex=True, location="evil.example.com#")


def test_missing_google_credentials_fail_when_the_model_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="GEMINI_API_KEY"):
        GeminiModel("m")
    with pytest.raises(ConfigError):
        GeminiModel("m", vertex=True, project="p")
    monkeypatch.setenv("GOOGLE_ACCESS_TOKEN", "ya29-env")
    with pytest.raises(ConfigError, match="project"):
        GeminiModel("m", vertex=True)  # a token but nowhere to send it


# ---------------------------------------------------------------------------------------------
# Bedrock


async def test_bedrock_token_goes_to_aws_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", "bedrock-env")
    request = await first_request(lambda c: BedrockModel("m", region="us-east-1", http_client=c))
    assert request.url.host == "bedrock-runtime.us-east-1.amazonaws.com"
    assert request.headers["authorization"] == "Bearer bedrock-env"
    with pytest.raises(ConfigError):
        BedrockModel("m", region="us-east-1", base_url="https://proxy.example.com")


async def test_default_chain_credentials_sign_for_aws_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    vpc = "https://vpce-1.bedrock-runtime.us-east-1.vpce.amazonaws.com"
    request = await first_request(
        lambda c: BedrockModel("m", region="us-east-1", base_url=vpc, http_client=c)
    )
    assert "AKIDEXAMPLE" in request.headers["authorization"]
    with pytest.raises(ConfigError):
        BedrockModel("m", region="us-east-1", base_url="https://proxy.example.com")
    given = Credentials("AKIDGIVEN", "secret")
    request = await first_request(
        lambda c: BedrockModel(
            "m", region="us-east-1", base_url="https://proxy.example.com", credentials=given, http_client=c
        )
    )
    assert "AKIDGIVEN" in request.headers["authorization"]


def test_missing_aws_credentials_fail_when_the_model_is_built() -> None:
    with pytest.raises(ConfigError, match="AWS"):
        BedrockModel("m", region="us-east-1")
