"""``toolwire models``: every model string, where its requests go, its key variable and whether it is set
(never the key), in lines that fit an 80-column terminal; an unknown provider names the known ones."""

from __future__ import annotations

from pathlib import Path

from tests.cli.helpers import command_env, sqlite_url, toolwire
from toolwire.cli._models import rows
from toolwire.models._catalog import PRESETS


def entries(stdout: str) -> dict[str, str]:
    """Each provider's lines joined, keyed by its first model string's provider prefix."""
    found: dict[str, str] = {}
    current = ""
    for line in stdout.splitlines()[2:]:
        if not line.startswith(" "):
            current = line.split()[0].split(":")[0].rstrip(",")
            found[current] = line
        else:
            found[current] += "\n" + line.strip()
    return found


def test_models_lists_presets_and_says_which_keys_are_set(tmp_path: Path) -> None:
    env = command_env(GROQ_API_KEY="gsk-very-secret", AZURE_OPENAI_AD_TOKEN="entra-very-secret")
    for preset in PRESETS.values():
        if preset.key_variable and preset.key_variable != "GROQ_API_KEY":
            env.pop(preset.key_variable, None)
    env.pop("AZURE_OPENAI_API_KEY", None)
    (tmp_path / ".env").write_text("MISTRAL_API_KEY=from-dotenv-secret\n")
    result = toolwire("models", cwd=tmp_path, env=env)
    assert result.returncode == 0 and result.stderr == ""
    listed = entries(result.stdout)
    assert set(PRESETS) | {"openai", "anthropic", "gemini", "azure"} <= set(listed)
    assert listed["groq"].endswith("GROQ_API_KEY: set") and "https://api.groq.com/openai/v1" in listed["groq"]
    assert listed["mistral"].endswith("MISTRAL_API_KEY: set")  # from ./.env, as every command reads it
    assert listed["cerebras"].endswith("CEREBRAS_API_KEY: not set")
    assert listed["azure"].endswith("set (AZURE_OPENAI_AD_TOKEN)")
    assert listed["ollama"].endswith("not needed on loopback")
    assert "lmstudio-responses:MODEL[@URL]" in listed["lmstudio"]
    assert (
        "anthropic-vertex:MODEL" in listed["vertex"] and "GOOGLE_APPLICATION_CREDENTIALS" in listed["vertex"]
    )
    assert (
        "anthropic-bedrock:MODEL_ID" in listed["bedrock"] and "AWS_BEARER_TOKEN_BEDROCK" in listed["bedrock"]
    )
    assert "secret" not in result.stdout


def test_models_fits_the_terminal_and_lists_the_keyless_models() -> None:
    nothing_set = command_env()
    everything_set = command_env()
    for row in rows():
        for name in row.key_variables:
            nothing_set.pop(name, None)
            everything_set[name] = "k"
    plain, full = toolwire("models", env=nothing_set), toolwire("models", env=everything_set)
    assert max(len(line) for line in plain.stdout.splitlines()) <= 80
    assert max(len(line) for line in full.stdout.splitlines()) <= 100  # "set (AWS_BEARER_TOKEN_BEDROCK)"
    listed = entries(plain.stdout)
    assert listed["local"].startswith("local ") and listed["local"].endswith("no key")
    assert listed["scripted"].startswith("scripted:FILE.json ")
    assert listed["openai-compatible"].startswith("openai-compatible:MODEL@URL ")


def test_an_unknown_provider_names_the_known_ones(tmp_path: Path) -> None:
    done = toolwire("run", "hi", "--model", "opnai:gpt-4o", "--store", sqlite_url(tmp_path / "t.db"))
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert "unknown model provider 'opnai'" in line and "did you mean 'openai:...'?" in line
    for known in ("openai", "anthropic", "gemini", "ollama", "openai-compatible", "local", "scripted"):
        assert f" {known}," in line or line.endswith(f" {known}")
    assert not (tmp_path / "t.db").exists()
