"""Provider presets (``toolwire.models._catalog``) and Azure OpenAI: each request goes to the preset's URL with
its own key only, and carries the preset's quirks. Requests are captured by an httpx.MockTransport (see
``test_api_keys``); nothing here reaches a real server."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest

from tests.models.test_api_keys import first_request, inject_client, send
from toolwire.errors import ConfigError
from toolwire.messages import Message, ReasoningPart, ToolCallPart, ToolResultPart
from toolwire.models import infer_model
from toolwire.models._catalog import PRESETS, SELF_HOSTED_KEY_VARIABLE, Preset, alphanumeric_9
from toolwire.models.azure import AzureOpenAIChatModel, AzureOpenAIResponsesModel
from toolwire.models.base import ModelRequest, ModelSettings, ToolDefinition
from toolwire.models.openai_chat import OpenAIChatModel
from toolwire.models.openai_chat._stream import chat_usage, usage_quirk
from toolwire.models.openai_responses import OpenAIResponsesModel

HOSTED = [p for p in PRESETS.values() if p.key_variable is not None]
SELF_HOSTED = [p for p in PRESETS.values() if p.key_variable is None]
AZURE_VARIABLES = (
    "AZURE_OPENAI_ENDPOINT",
    "AZURE_OPENAI_API_KEY",
    "AZURE_OPENAI_AD_TOKEN",
    "AZURE_OPENAI_API_VERSION",
)
ENDPOINT = "https://res.openai.azure.com"


@pytest.fixture(autouse=True)
def every_key_set_but_azure(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every other provider's variable holds its own value: a test sees which one a request carries."""
    for preset in HOSTED:
        assert preset.key_variable is not None
        monkeypatch.setenv(preset.key_variable, f"key-of-{preset.name}")
    monkeypatch.setenv("OPENAI_API_KEY", "key-of-openai")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv(SELF_HOSTED_KEY_VARIABLE, raising=False)
    for name in AZURE_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def body(request: httpx.Request) -> dict[str, object]:
    parsed = json.loads(request.content)
    assert isinstance(parsed, dict)
    return parsed


# ---------------------------------------------------------------------------------------------
# Hosted presets: URL and key


@pytest.mark.parametrize("preset", HOSTED, ids=lambda p: p.name)
async def test_hosted_preset_sends_its_own_key_to_its_own_url(
    monkeypatch: pytest.MonkeyPatch, preset: Preset
) -> None:
    sent = inject_client(monkeypatch)
    model = infer_model(f"{preset.name}:some-model")
    assert isinstance(model, OpenAIChatModel) and model.preset is preset
    request = await send(model, sent)
    assert str(request.url) == f"{preset.base_url}/chat/completions"
    assert request.headers["authorization"] == f"Bearer key-of-{preset.name}"
    sent_body = body(request)
    assert sent_body["model"] == "some-model" and "max_tokens" not in sent_body


@pytest.mark.parametrize("preset", HOSTED, ids=lambda p: p.name)
def test_hosted_preset_without_its_variable_is_a_config_error(
    monkeypatch: pytest.MonkeyPatch, preset: Preset
) -> None:
    assert preset.key_variable is not None
    monkeypatch.delenv(preset.key_variable)  # OPENAI_API_KEY and every other preset's key stay set
    with pytest.raises(ConfigError, match=preset.key_variable):
        infer_model(f"{preset.name}:some-model")


async def test_a_preset_key_never_goes_to_another_host(monkeypatch: pytest.MonkeyPatch) -> None:
    for url in ("https://proxy.example.com/v1", "http://api.groq.com/openai/v1"):  # elsewhere, or clear text
        with pytest.raises(ConfigError, match="GROQ_API_KEY is only sent to Groq's own host"):
            OpenAIChatModel("m", preset="groq", base_url=url)
    request = await first_request(
        lambda client: OpenAIChatModel(
            "m",
            preset="groq",
            base_url="https://proxy.example.com/v1",
            api_key="explicit",
            http_client=client,
        )
    )
    assert request.url.host == "proxy.example.com" and request.headers["authorization"] == "Bearer explicit"


def test_unknown_preset() -> None:
    with pytest.raises(ConfigError, match="unknown provider preset"):
        OpenAIChatModel("m", preset="nope")
    with pytest.raises(ConfigError, match="unknown model provider"):
        infer_model("nope:m")


# ---------------------------------------------------------------------------------------------
# Self-hosted presets


@pytest.mark.parametrize("preset", [p for p in SELF_HOSTED if p.base_url], ids=lambda p: p.name)
async def test_self_hosted_preset_runs_without_a_key(monkeypatch: pytest.MonkeyPatch, preset: Preset) -> None:
    sent = inject_client(monkeypatch)
    request = await send(infer_model(f"{preset.name}:llama3"), sent)
    assert str(request.url) == f"{preset.base_url}/chat/completions"
    assert "authorization" not in request.headers


async def test_self_hosted_preset_elsewhere_takes_the_compatible_key(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="has no usual address"):
        infer_model("vllm:qwen")
    with pytest.raises(ConfigError, match="http"):
        infer_model("vllm:qwen@gpu-box:8000")
    with pytest.raises(ConfigError, match=SELF_HOSTED_KEY_VARIABLE):
        infer_model("ollama:llama3@https://gpu.example.com/v1")
    monkeypatch.setenv(SELF_HOSTED_KEY_VARIABLE, "compatible")
    sent = inject_client(monkeypatch)
    request = await send(infer_model("vllm:qwen@https://gpu.example.com/v1"), sent)
    assert str(request.url) == "https://gpu.example.com/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer compatible"


async def test_lmstudio_speaks_responses_too(monkeypatch: pytest.MonkeyPatch) -> None:
    sent = inject_client(monkeypatch)
    model = infer_model("lmstudio-responses:openai/gpt-oss-20b")
    assert isinstance(model, OpenAIResponsesModel)
    request = await send(model, sent)
    assert str(request.url) == "http://localhost:1234/v1/responses"
    assert "authorization" not in request.headers and body(request)["model"] == "openai/gpt-oss-20b"
    with pytest.raises(ConfigError):
        infer_model("groq-responses:m")  # only presets that speak it


# ---------------------------------------------------------------------------------------------
# Quirks

HISTORY = [
    Message.user("weather?"),
    Message(
        role="assistant",
        parts=(
            ReasoningPart(
                text="think", provider_metadata={"openai": {"reasoning_field": "reasoning_content"}}
            ),
            ToolCallPart(tool_call_id="call_PTLP8xhu3uwZk4l3nlnrrJha", tool_name="get_weather"),
            ToolCallPart(tool_call_id="abcDEF123", tool_name="get_time"),
        ),
    ),
    Message(
        role="tool",
        parts=(
            ToolResultPart(
                tool_call_id="call_PTLP8xhu3uwZk4l3nlnrrJha", tool_name="get_weather", output="sunny"
            ),
            ToolResultPart(tool_call_id="abcDEF123", tool_name="get_time", output="noon"),
        ),
    ),
]
TOOLS = (ToolDefinition(name="get_weather"), ToolDefinition(name="get_time"))


def wire_messages(model: OpenAIChatModel) -> list[Any]:
    wire, _ = model.build_body(ModelRequest(messages=HISTORY, tools=TOOLS))
    messages = wire["messages"]
    assert isinstance(messages, list)
    return messages


def test_mistral_tool_call_ids_are_nine_alphanumerics_for_calls_and_results_alike() -> None:
    messages = wire_messages(OpenAIChatModel("mistral-large-latest", preset="mistral"))
    call_ids = [c["id"] for c in messages[1]["tool_calls"]]
    result_ids = [m["tool_call_id"] for m in messages[2:]]
    assert call_ids == result_ids
    assert all(re.fullmatch(r"[A-Za-z0-9]{9}", i) for i in call_ids)
    assert call_ids[1] == "abcDEF123"  # Mistral's own ids go back as they came
    assert call_ids[0] == alphanumeric_9("call_PTLP8xhu3uwZk4l3nlnrrJha")  # the same on every turn
    # History keeps the original ids; other servers see them.
    other = wire_messages(OpenAIChatModel("m", preset="groq"))
    assert other[1]["tool_calls"][0]["id"] == "call_PTLP8xhu3uwZk4l3nlnrrJha"


def test_alphanumeric_9_spreads_ids() -> None:
    ids = {alphanumeric_9(f"call_{i}") for i in range(2000)}
    assert len(ids) == 2000 and all(re.fullmatch(r"[A-Za-z0-9]{9}", i) for i in ids)


def test_deepseek_sends_reasoning_content_back_on_tool_call_turns() -> None:
    model = OpenAIChatModel("deepseek-reasoner", preset="deepseek")
    assert model.reasoning_field == "reasoning_content"
    assistant = wire_messages(model)[1]
    assert assistant["reasoning_content"] == "think"
    bare = Message(role="assistant", parts=(ToolCallPart(tool_call_id="c1", tool_name="get_weather"),))
    wire, _ = model.build_body(ModelRequest(messages=[Message.user("q"), bare], tools=TOOLS))
    assert wire["messages"][1]["reasoning_content"] == ""


def test_usage_quirks_agree_with_the_hosts() -> None:
    for preset in HOSTED:
        assert preset.base_url is not None
        assert usage_quirk(preset.base_url) == preset.usage_quirk, preset.name
    xai = OpenAIChatModel("grok-4", preset="xai", base_url="https://gateway.example.com/v1", api_key="k")
    usage = {
        "prompt_tokens": 10,
        "completion_tokens": 5,
        "completion_tokens_details": {"reasoning_tokens": 7},
    }
    assert chat_usage(usage, xai._parser()._usage_quirk).output_tokens == 12  # type: ignore[attr-defined]


@pytest.mark.parametrize("choice", ["get_weather"])
def test_a_tool_choice_the_server_does_not_take_is_left_out(choice: str) -> None:
    request = ModelRequest(messages=[Message.user("q")], tools=TOOLS, tool_choice=choice)
    wire, warnings = OpenAIChatModel("m", preset="llamacpp").build_body(request)
    assert "tool_choice" not in wire and warnings == [
        "tool_choice 'get_weather' ignored: llama.cpp server does not support it"
    ]
    wire, warnings = OpenAIResponsesModel("m", preset="lmstudio").build_body(request)
    assert "tool_choice" not in wire and len(warnings) == 1
    required = ModelRequest(messages=[Message.user("q")], tools=TOOLS, tool_choice="required")
    wire, warnings = OpenAIChatModel("m", preset="llamacpp").build_body(required)
    assert wire["tool_choice"] == "required" and not warnings
    wire, _ = OpenAIChatModel("m", preset="mistral").build_body(request)
    assert wire["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}


# ---------------------------------------------------------------------------------------------
# Azure OpenAI


async def test_azure_chat_url_api_version_and_api_key_header(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", f"{ENDPOINT}/")
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "azure-key")
    sent = inject_client(monkeypatch)
    model = infer_model("azure:my-gpt-4o")
    assert isinstance(model, AzureOpenAIChatModel)
    request = await send(model, sent)
    assert (
        str(request.url) == f"{ENDPOINT}/openai/deployments/my-gpt-4o/chat/completions?api-version=2024-10-21"
    )
    assert request.headers["api-key"] == "azure-key" and "authorization" not in request.headers
    monkeypatch.setenv("AZURE_OPENAI_API_VERSION", "2025-04-01-preview")
    wire, _ = infer_model("azure:my-gpt-4o").build_body(  # type: ignore[attr-defined]
        ModelRequest(messages=[Message.user("q")], settings=ModelSettings(max_tokens=5))
    )
    assert wire["max_completion_tokens"] == 5 and "max_tokens" not in wire
    sent.clear()
    request = await send(infer_model("azure:my-gpt-4o"), sent)
    assert request.url.params["api-version"] == "2025-04-01-preview"


async def test_azure_responses_and_entra_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", ENDPOINT)
    monkeypatch.setenv("AZURE_OPENAI_AD_TOKEN", "entra-token")
    sent = inject_client(monkeypatch)
    model = infer_model("azure-responses:my-gpt-5")
    assert isinstance(model, AzureOpenAIResponsesModel)
    request = await send(model, sent)
    assert str(request.url) == f"{ENDPOINT}/openai/v1/responses"
    assert request.headers["authorization"] == "Bearer entra-token" and "api-key" not in request.headers
    assert body(request)["model"] == "my-gpt-5"


def test_azure_credentials_only_for_azure_hosts(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="AZURE_OPENAI_ENDPOINT"):
        infer_model("azure:dep")
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", ENDPOINT)
    with pytest.raises(ConfigError, match="AZURE_OPENAI_API_KEY"):
        infer_model("azure:dep")  # OPENAI_API_KEY is set, and never used here
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "azure-key")
    for endpoint in ("https://res.openai.azure.com.example.com", "http://res.openai.azure.com"):
        monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", endpoint)
        with pytest.raises(ConfigError, match="only sent to Azure's own hosts"):
            infer_model("azure:dep")
    assert AzureOpenAIChatModel("dep", endpoint="https://gw.example.com", api_key="k").api_key == "k"
    with pytest.raises(ConfigError, match="deployment"):
        AzureOpenAIChatModel("../other", endpoint=ENDPOINT, api_key="k")
