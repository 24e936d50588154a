"""``toolwire models``: the model strings, where each one's requests go, its key variable and whether
that variable is set. A key's value is never printed; the listing fits an 80-column terminal."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass

from rich.text import Text

from toolwire.cli._output import console

WIDTH = 80
"""Lines longer than this are split: a provider's URL and its key go on lines of their own."""


@dataclass(frozen=True, slots=True)
class Row:
    model_strings: tuple[str, ...]
    """What ``--model`` takes for this provider, e.g. ``("groq:MODEL",)``."""
    provider: str
    base_url: str
    key_variables: tuple[str, ...]
    """Read in this order; the first set one is used."""
    keyless: str = ""
    """When no key is needed (shown instead of "not set")."""

    def key(self) -> str:
        """The key variables and whether one is set (never its value)."""
        if not self.key_variables:
            return self.keyless
        return f"{' / '.join(self.key_variables)}: {self.status()}"

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
        Row(("local",), "SmolLM2-135M on this CPU ('local' extra)", "in this process", (), "no key"),
        Row(
            ("scripted:FILE.json",), "turns read from a JSON file (tests, demos)", "no network", (), "no key"
        ),
        Row(
            ("openai:MODEL", "openai-responses:MODEL"),
            OPENAI.name,
            OPENAI.default_base_url,
            OPENAI.key_variables,
        ),
        Row(("anthropic:MODEL",), ANTHROPIC.name, ANTHROPIC.default_base_url, ANTHROPIC.key_variables),
        Row(("gemini:MODEL",), GEMINI_API.name, GEMINI_API.default_base_url, GEMINI_API.key_variables),
        Row(
            ("vertex:MODEL", "anthropic-vertex:MODEL"),
            "Vertex AI (Gemini, Claude)",
            "https://{location}-aiplatform.googleapis.com",
            ("GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_ACCESS_TOKEN"),
            keyless="gcloud / VM, if any",
        ),
        Row(
            ("bedrock:MODEL_ID", "anthropic-bedrock:MODEL_ID"),
            "AWS Bedrock",
            "https://bedrock-runtime.{region}.amazonaws.com",
            ("AWS_ACCESS_KEY_ID", "AWS_PROFILE", AWS_TOKEN_VARIABLE),
            keyless="default chain",
        ),
        Row(
            ("azure:DEPLOYMENT", "azure-responses:DEPLOYMENT"),
            "Azure OpenAI",
            os.environ.get(AZURE_ENDPOINT_VARIABLE) or f"${AZURE_ENDPOINT_VARIABLE}",
            (AZURE_KEY_VARIABLE, AZURE_TOKEN_VARIABLE),
        ),
        Row(
            ("openai-compatible:MODEL@URL",),
            "any OpenAI-compatible server",
            "URL",
            (SELF_HOSTED_KEY_VARIABLE,),
            keyless="not needed on loopback",
        ),
    ]
    for preset in PRESETS.values():
        model = (
            "MODEL" if preset.key_variable is not None else "MODEL[@URL]" if preset.base_url else "MODEL@URL"
        )
        strings: tuple[str, ...] = (f"{preset.name}:{model}",)
        if preset.responses:
            strings += (f"{preset.name}-responses:{model}",)
        if preset.key_variable is not None:
            out.append(Row(strings, preset.title, preset.base_url or "", (preset.key_variable,)))
        else:
            out.append(
                Row(
                    strings,
                    preset.title,
                    preset.base_url or "URL",
                    (SELF_HOSTED_KEY_VARIABLE,),
                    keyless="not needed on loopback",
                )
            )
    return out


def entry_lines(row: Row) -> list[str]:
    """A provider as two lines (model strings and provider; URL and key), three when the second is too long."""
    strings = ", ".join(row.model_strings)
    head = f"{strings:<38}{row.provider}" if len(strings) < 38 else f"{strings}  {row.provider}"
    detail = f"    {row.base_url}   {row.key()}"
    return [head, detail] if len(detail) <= WIDTH else [head, f"    {row.base_url}", f"    {row.key()}"]


async def list_models(args: argparse.Namespace) -> int:
    console.print(Text(f"{'MODEL STRING':<38}PROVIDER", style="bold"), soft_wrap=True)
    console.print(Text("    WHERE REQUESTS GO   KEY VARIABLE: SET?", style="bold"), soft_wrap=True)
    for row in rows():
        # Plain lines, never wrapped or cut by rich: each fits WIDTH columns (one longer value excepted).
        for line in entry_lines(row):
            console.print(Text(line), soft_wrap=True)
    return 0


__all__ = ["Row", "entry_lines", "list_models", "rows"]
