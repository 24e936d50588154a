"""OpenAI Responses API adapter (``POST {base_url}/responses``), streaming and non-streaming.

Output items map to canonical parts, and their metadata goes in ``provider_metadata["openai"]``:

- ``function_call`` -> a tool call whose ``tool_call_id`` is the item's ``call_id``; the item id
  (``fc_...``) is kept as ``item_id``. Argument deltas stream as they come; the final arguments are the
  ``.done`` value.
- ``reasoning`` -> one ReasoningPart per summary part (text = summary text), each with ``item_id``; the
  last one also carries ``encrypted_content`` from ``output_item.done`` (the value in ``.added`` can differ
  and is not the one to send back). Parts with the same ``item_id`` are merged back into one item. Servers
  of the Open Responses specification (LM Studio, vLLM) send the reasoning itself as ``reasoning_text``
  content parts instead: one ReasoningPart each, marked ``content_type: "reasoning_text"`` and sent back as
  the item's ``content``.
- ``message`` -> one TextPart per ``output_text`` content part, with ``item_id``, ``phase`` (gpt-5.5
  ``commentary`` / ``final_answer``) and non-empty ``annotations``.
- provider-executed items (``web_search_call``, ``file_search_call``, ...) -> a tool call with
  ``provider_executed=True`` plus its ToolResult; nothing runs on the client. An ``mcp_call`` (a remote MCP
  server's tool) is named as the MCP tool is, with its arguments and its ``server_label`` (metadata); its
  result is the item's ``output``, or its ``error`` as an error result.

``store=False`` (the default) keeps nothing on OpenAI's side, so the continuation cannot point at stored
items. Then: ``include: ["reasoning.encrypted_content"]`` is requested and reasoning items go back with
their id and encrypted content (dropped when there is none: the server could not resolve them);
function-call items go back without their ids (the recordings, made with the server default
``store=true``, send them) and a message as an assistant ``message`` input item with string content (the
only shape the API's types allow for a message without its id); provider-executed items are left out (the
server cannot resolve them and the model's own message already carries what it learned). With
``store=True`` every item goes back with its id.

Function tools always carry ``strict``: the Responses API takes a missing one as true.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Unpack

from toolwire.models._catalog import Preset
from toolwire.models._http import Connection, Json, WireParser
from toolwire.models._openai_shared import OpenAIWireModel
from toolwire.models.base import ModelRequest, StreamError
from toolwire.models.openai_responses._request import PROVIDER_EXECUTED_ITEMS, build_body, to_wire_input
from toolwire.models.openai_responses._stream import ResponsesParser, events_from_response


class OpenAIResponsesModel(OpenAIWireModel):
    """A model behind the OpenAI Responses API.

    ``reasoning`` is sent as the request's ``reasoning`` object (e.g. ``{"effort": "low", "summary":
    "detailed"}``); ``builtin_tools`` are OpenAI tools appended verbatim to ``tools`` (e.g.
    ``{"type": "web_search"}``). See the module docstring for what ``store`` changes. As for
    :class:`~toolwire.models.openai_chat.OpenAIChatModel`, ``OPENAI_API_KEY`` is only sent to OpenAI's own
    hosts (another server takes ``api_key=`` or ``OPENAI_COMPATIBLE_API_KEY``), and a missing key fails
    when the model is built. ``preset`` names a provider of ``toolwire.models._catalog`` that speaks this
    wire too (``"lmstudio"``): its URL, key rule and ``tool_choice`` support.
    """

    path = "/responses"

    def __init__(
        self,
        model: str,
        *,
        store: bool = False,
        include_encrypted_reasoning: bool = True,
        reasoning: Mapping[str, Any] | None = None,
        builtin_tools: Sequence[Mapping[str, Any]] = (),
        preset: str | Preset | None = None,
        **connection: Unpack[Connection],
    ) -> None:
        self._use_preset(preset)
        super().__init__(model, **connection)
        self.store = store
        self.include_encrypted_reasoning = include_encrypted_reasoning
        self.reasoning = dict(reasoning) if reasoning is not None else None
        self.builtin_tools = [dict(t) for t in builtin_tools]

    def build_body(self, request: ModelRequest) -> tuple[Json, list[str]]:
        return build_body(request, self)

    def _parser(self) -> WireParser:
        return ResponsesParser(model=self.model_name)

    def _whole_events(self, body: Json) -> Iterable[Json | StreamError]:
        return events_from_response(body, model=self.model_name)


__all__ = ["PROVIDER_EXECUTED_ITEMS", "OpenAIResponsesModel", "to_wire_input"]
