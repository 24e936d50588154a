"""``toolwire models``: the model-string prefixes, where each one's requests go, its key variable and whether
that variable is set. A key's value is never printed."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass

from rich.text import Text

from toolwire.cli._output import console


@dataclass(frozen=True, slots=True)
class Row:
    prefix: str
    provider: str
    base_url: str
    key_variables: tuple[str, ...]
    """Read in this order; the first set one is used."""
    keyless: str = ""
    """When no key is needed (shown instead of "not set")."""

    def status(self) -> str:
        found = next((name for name in self.key_variables if os.environ.get(name)), None)
        if found is not None:
            return f"set ({found})" if len(self.key_variables) > 1 else "set"
        return self.keyless or "not set"


def rows() -> list[Row]:
    from toolwire.models._catalog import PRESETS, SELF_HOSTED_KEY_VARIABLE
    from toolwire.models._providers import (
        ANTHROPIC,
        AWS_TOKEN_VARIABLE,
        AZURE_ENDPOINT_VARIABLE,
        AZURE_KEY_VARIABLE,
        AZURE_TOKEN_VARIABLE,
        GEMINI_API,
        OPENAI,
    )

    out = [
        Row("openai, openai-responses", OPENAI.name, OPENAI.default_base_url, OPENAI.key_variables),
        Row("anthropic", ANTHROPIC.name, ANTHROPIC.default_base_url, ANTHROPIC.key_variables),
        Row("gemini", GEMINI_API.name, GEMINI_API.default_base_url, GEMINI_API.key_variables),
        Row(
            "vertex, anthropic-vertex",
            "Vertex AI (Gemini, Claude)",
            "https://{location}-aiplatform.googleapis.com",
            ("GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_ACCESS_TOKEN"),
            keyless="Application Default Credentials (gcloud, a cloud VM) if any",
        ),
        Row(
            "bedrock, anthropic-bedrock",
            "AWS Bedrock (Converse; Claude in the Messages shape)",
            "https://bedrock-runtime.{region}.amazonaws.com",
            ("AWS_ACCESS_KEY_ID", "AWS_PROFILE", AWS_TOKEN_VARIABLE),
            keyless="AWS default chain (config files, instance role) if any",
        ),
        Row(
            "azure, azure-responses",
            "Azure OpenAI",
            os.environ.get(AZURE_ENDPOINT_VARIABLE) or f"${AZURE_ENDPOINT_VARIABLE}",
            (AZURE_KEY_VARIABLE, AZURE_TOKEN_VARIABLE),
        ),
    ]
    for preset in PRESETS.values():
        prefix = f"{preset.name}, {preset.name}-responses" if preset.responses else preset.name
        if preset.key_variable is not None:
            out.append(Row(prefix, preset.title, preset.base_url or "", (preset.key_variable,)))
        else:
            out.append(
                Row(
                    prefix,
                    preset.title,
                    preset.base_url or f"{preset.name}:MODEL@BASE_URL",
                    (SELF_HOSTED_KEY_VARIABLE,),
                    keyless="not needed on loopback",
                )
            )
    return out


async def list_models(args: argparse.Namespace) -> int:
    header = ("PREFIX", "PROVIDER", "BASE URL", "KEY VARIABLE", "KEY")
    table = [header] + [
        (r.prefix, r.provider, r.base_url, " / ".join(r.key_variables), r.status()) for r in rows()
    ]
    widths = [max(len(line[i]) for line in table) for i in range(len(header) - 1)]
    for line in table:  # plain aligned columns: never wrapped or cut, whatever the terminal
        cells = [cell.ljust(width) for cell, width in zip(line, widths, strict=False)]
        console.print(Text("  ".join([*cells, line[-1]])), soft_wrap=True)
    return 0


__all__ = ["Row", "list_models", "rows"]
