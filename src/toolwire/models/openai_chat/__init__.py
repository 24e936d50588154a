"""OpenAI Chat Completions adapter (``POST {base_url}/chat/completions``), streaming and non-streaming.

One wire serves OpenAI and every OpenAI-compatible server (vLLM, Ollama, llama.cpp server, Groq, DeepSeek,
OpenRouter, Gemini's OpenAI endpoint, ...) through ``base_url``. Their differences, as seen in recorded
traffic, are handled here:

- tool-call deltas are keyed by ``index``; Groq sends a whole call in one delta; a call with an empty id
  (Gemini's endpoint) gets a deterministic id built from the response id and the call's position;
- reasoning arrives as ``reasoning_content`` (DeepSeek, vLLM) or ``reasoning`` (Ollama, Groq, OpenRouter);
  the field name is remembered in ``provider_metadata["openai"]["reasoning_field"]`` and the text goes back
  in that field of the assistant message (DeepSeek requires it on tool-call turns). The name written is
  always one of ``REASONING_FIELDS`` (or the configured ``reasoning_field``): history only selects among
  them, so it can never name another field such as ``role``;
- Gemini's ``extra_content`` (``{"google": {"thought_signature": ...}}``) is kept on the ToolCallPart
  (``extra_content`` for a per-call value, ``message_extra_content`` for a message-level one) and sent back
  in the same place, reduced to that signature (and its ``thought`` flag);
- Mistral's reasoning models (Magistral) send ``content`` as a list of chunks, ``{"type": "thinking",
  "thinking": [{"type": "text", "text": ...}]}`` and ``{"type": "text", "text": ...}``: thinking becomes
  reasoning (not sent back), text becomes text;
- Azure OpenAI opens a stream with a content-filter chunk (``prompt_filter_results``, no choices) whose
  ``id`` and ``model`` are empty: the response id and model come from the first chunk that has them;
- usage comes from ``usage`` or Groq's ``x_groq.usage``; ``obfuscation`` padding is ignored. Usage output
  tokens always include the reasoning: where a server counts it outside ``completion_tokens`` (xAI, Gemini's
  OpenAI endpoint) the base URL's host selects the correction (``USAGE_QUIRKS``, with the sources);
- an assistant message with tool calls always has ``content`` (``""`` when there is no text): llama.cpp's
  server (llama-cpp-python) fails with HTTP 500 on one without it, and every other server takes ``""``;
- an ``event: error`` frame inside a 200 stream (Groq ``tool_use_failed``) becomes a :class:`StreamError`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Unpack

from toolwire.models._catalog import Preset, alphanumeric_9
from toolwire.models._http import DONE, Connection, Json, WireParser
from toolwire.models._openai_shared import OpenAIWireModel
from toolwire.models._providers import OPENAI
from toolwire.models.base import ModelRequest, StreamError
from toolwire.models.openai_chat._request import REASONING_FIELDS, build_body, to_wire_messages
from toolwire.models.openai_chat._stream import USAGE_QUIRKS, ChatParser, usage_quirk


class OpenAIChatModel(OpenAIWireModel):
    """A model behind the Chat Completions wire (OpenAI or any compatible server).

    Without ``api_key``, the key is ``OPENAI_API_KEY`` for OpenAI's own hosts (https ``api.openai.com``) and
    ``OPENAI_COMPATIBLE_API_KEY`` for any other server, so an OpenAI key never reaches a third party; a
    loopback server may run without one, ``api_key=""`` says a server takes none, and any other missing
    key is a :class:`~toolwire.errors.ConfigError` here, when the model is built.
    ``reasoning_field`` forces the assistant-message field reasoning is sent back in; with it set, assistant
    tool-call messages always carry it (an empty string when there was no reasoning), as DeepSeek's
    thinking mode requires. ``include_usage=False`` drops ``stream_options`` for servers that reject it.
    ``preset`` names a provider of ``toolwire.models._catalog`` (``"groq"``, ``"ollama"``...): its URL, its
    key variable (sent to its own host only) and its quirks (reasoning field, usage, ``tool_choice``,
    tool-call ids); ``infer_model("groq:MODEL")`` builds it.
    ``base_url``, ``http_client``, ``stream`` and ``headers``: as for every HTTP adapter
    (:class:`~toolwire.models._http.HTTPModel`).
    """

    path = "/chat/completions"

    def __init__(
        self,
        model: str,
        *,
        reasoning_field: str | None = None,
        include_usage: bool = True,
        preset: str | Preset | None = None,
        **connection: Unpack[Connection],
    ) -> None:
        self._use_preset(preset)
        super().__init__(model, **connection)
        if reasoning_field is None and self.preset is not None:
            reasoning_field = self.preset.reasoning_field
        self.reasoning_field = reasoning_field
        self.include_usage = include_usage

    @property
    def max_tokens_field(self) -> str:
        # OpenAI deprecated max_tokens (reasoning models reject it); compatible servers know max_tokens.
        return "max_completion_tokens" if self.base_url == OPENAI.default_base_url else "max_tokens"

    def wire_tool_call_id(self, tool_call_id: str) -> str:
        """The id a call (and its result) of history carries on the wire: as it is, or as the preset needs."""
        if self.preset is not None and self.preset.tool_call_ids == "alphanumeric-9":
            return alphanumeric_9(tool_call_id)
        return tool_call_id

    def build_body(self, request: ModelRequest) -> tuple[Json, list[str]]:
        return build_body(request, self)

    def _parser(self) -> WireParser:
        return ChatParser(
            model=self.model_name,
            reasoning_field=self.reasoning_field,
            usage_quirk=self.preset.usage_quirk if self.preset is not None else usage_quirk(self.base_url),
        )

    def _whole_events(self, body: Json) -> Iterable[Json | StreamError]:
        # A non-streaming completion is one chunk whose ``message`` is the whole delta.
        return [body, {"type": DONE}]


__all__ = ["REASONING_FIELDS", "USAGE_QUIRKS", "OpenAIChatModel", "to_wire_messages"]
