"""``toolwire models``: every provider prefix, its key variable and whether it is set, never the key."""

from __future__ import annotations

from pathlib import Path

from tests.cli.helpers import command_env, toolwire
from toolwire.models._catalog import PRESETS


def test_models_lists_presets_and_says_which_keys_are_set(tmp_path: Path) -> None:
    env = command_env(GROQ_API_KEY="gsk-very-secret", AZURE_OPENAI_AD_TOKEN="entra-very-secret")
    for preset in PRESETS.values():
        if preset.key_variable and preset.key_variable != "GROQ_API_KEY":
            env.pop(preset.key_variable, None)
    env.pop("AZURE_OPENAI_API_KEY", None)
    (tmp_path / ".env").write_text("MISTRAL_API_KEY=from-dotenv-secret\n")
    result = toolwire("models", cwd=tmp_path, env=env)
    assert result.returncode == 0 and result.stderr == ""
    lines = {line.split()[0].rstrip(","): line for line in result.stdout.splitlines()[1:]}
    assert set(PRESETS) | {"openai", "anthropic", "gemini", "azure"} <= set(lines)
    assert "GROQ_API_KEY" in lines["groq"] and lines["groq"].endswith(" set")
    assert "https://api.groq.com/openai/v1" in lines["groq"]
    assert lines["mistral"].endswith(" set")  # from ./.env, as every command reads it
    assert lines["cerebras"].endswith("not set")
    assert lines["azure"].endswith("set (AZURE_OPENAI_AD_TOKEN)")
    assert lines["ollama"].endswith("not needed on loopback")
    assert "lmstudio-responses" in lines["lmstudio"]
    assert "anthropic-vertex" in lines["vertex"] and "GOOGLE_APPLICATION_CREDENTIALS" in lines["vertex"]
    assert "anthropic-bedrock" in lines["bedrock"] and "AWS_BEARER_TOKEN_BEDROCK" in lines["bedrock"]
    assert "secret" not in result.stdout
