"""Model strings resolve to the right adapter, with keys from the usual environment variables."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolwire.errors import ConfigError
from toolwire.models import infer_model
from toolwire.models.anthropic import AnthropicModel
from toolwire.models.bedrock import BedrockModel
from toolwire.models.gemini import GeminiModel
from toolwire.models.openai_chat import OpenAIChatModel
from toolwire.models.openai_responses import OpenAIResponsesModel
from toolwire.models.scripted import ScriptedModel


def test_each_provider_string(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "ak-env")
    monkeypatch.setenv("GEMINI_API_KEY", "gk-env")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    openai = infer_model("openai:gpt-4o")
    assert (
        isinstance(openai, OpenAIChatModel) and openai.model_name == "gpt-4o" and openai.api_key == "sk-env"
    )
    assert isinstance(infer_model("openai-responses:gpt-5"), OpenAIResponsesModel)
    anthropic = infer_model("anthropic:claude-sonnet-4-5")
    assert isinstance(anthropic, AnthropicModel) and anthropic.model_name == "claude-sonnet-4-5"
    gemini = infer_model("gemini:gemini-2.5-flash")
    assert isinstance(gemini, GeminiModel) and gemini.model_name == "gemini-2.5-flash"
    assert isinstance(infer_model("bedrock:anthropic.claude-3-haiku"), BedrockModel)
    compatible = infer_model("openai-compatible:llama3@http://127.0.0.1:11434/v1")
    assert isinstance(compatible, OpenAIChatModel) and compatible.base_url == "http://127.0.0.1:11434/v1"
    script = tmp_path / "s.json"
    script.write_text(json.dumps([[{"type": "text", "text": "hi"}]]))
    assert isinstance(infer_model(f"scripted:{script}"), ScriptedModel)


@pytest.mark.parametrize("bad", ["nonsense", "unknown:model", "openai:", "openai-compatible:no-url"])
def test_bad_model_strings_are_config_errors(bad: str) -> None:
    with pytest.raises(ConfigError):
        infer_model(bad)
