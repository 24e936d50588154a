"""Canonical request -> Bedrock Converse request body
(https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html).

No ``provider_metadata`` is read (``ROUND_TRIP_METADATA`` is empty). Reasoning signatures, which live on
ReasoningPart, are sent back only when the assistant message came from Bedrock (or from an unknown
producer). Binary content travels as base64 strings, which is how the JSON wire carries Converse ``bytes``
fields.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from toolwire.errors import UnsupportedContentError
from toolwire.messages import FilePart, ReasoningPart, ToolCallPart, ToolResultPart
from toolwire.models._blocks import BlockHistory, tool_input
from toolwire.models._cache import bedrock_cache_points, bedrock_caches
from toolwire.models._http import Json
from toolwire.models._metadata import BEDROCK
from toolwire.models._settings import SettingNames, sampling_fields
from toolwire.models._tool_output import blocks, content_items
from toolwire.models.base import ModelRequest, ToolDefinition

PROVIDER = "bedrock"
ROUND_TRIP_METADATA = BEDROCK
"""What the request builder reads back from history (declared in ``toolwire.models._metadata``)."""

_DOCUMENT_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9\-()\[\] ]+")
_SETTINGS = SettingNames(max_tokens="maxTokens", top_p="topP", stop="stopSequences")
_IMAGE_FORMATS = {"image/png": "png", "image/jpeg": "jpeg", "image/gif": "gif", "image/webp": "webp"}
_DOCUMENT_FORMATS = {
    "application/pdf": "pdf",
    "text/csv": "csv",
    "application/msword": "doc",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.ms-excel": "xls",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
    "text/html": "html",
    "text/plain": "txt",
    "text/markdown": "md",
}


def build_body(
    request: ModelRequest,
    *,
    max_tokens: int | None,
    additional_fields: Mapping[str, Any],
    model_id: str = "",
) -> tuple[Json, list[str]]:
    """The JSON body for ``converse`` / ``converse-stream`` and the warnings about ignored settings
    (``model_id`` decides whether it gets ``cachePoint`` blocks: only the models Bedrock caches for do)."""
    system, messages = _History().turns(request)
    inference, warnings = sampling_fields(
        request.settings, _SETTINGS, wire="Bedrock Converse", default_max_tokens=max_tokens
    )
    body: Json = {"messages": messages}
    if system:
        body["system"] = [{"text": text} for text in system]
    if inference:
        body["inferenceConfig"] = inference
    tool_config = _to_wire_tool_config(request, messages, warnings)
    if tool_config is not None:
        body["toolConfig"] = tool_config
    if additional_fields:
        body["additionalModelRequestFields"] = dict(additional_fields)
    if request.output_schema is not None:
        body["outputConfig"] = {
            "textFormat": {
                "type": "json_schema",
                # Converse wants the schema as a JSON string, not an object.
                "structure": {
                    "jsonSchema": {
                        "schema": json.dumps(request.output_schema),
                        "name": request.output_schema_name,
                    }
                },
            }
        }
    if request.settings.parallel_tool_calls is not None:
        warnings.append("parallel_tool_calls is not supported by Bedrock Converse and was ignored")
    body.update(request.settings.extra)
    if request.settings.cache_breakpoints and bedrock_caches(model_id):
        bedrock_cache_points(body)
    return body, warnings


def _to_wire_tool_config(request: ModelRequest, messages: list[Json], warnings: list[str]) -> Json | None:
    if not request.tools:
        return None
    has_tool_blocks = any("toolUse" in b or "toolResult" in b for m in messages for b in m["content"])
    choice = request.tool_choice
    if choice == "none":
        # Converse has no "none" choice. Without tools the model cannot call one, but a history holding
        # toolUse/toolResult blocks is rejected unless toolConfig is present.
        if not has_tool_blocks:
            return None
        warnings.append("tool_choice 'none' is not supported by Bedrock Converse; tools stay available")
    config: Json = {"tools": [_to_wire_tool(t) for t in request.tools]}
    if choice == "required":
        config["toolChoice"] = {"any": {}}
    elif choice not in ("auto", "none"):
        config["toolChoice"] = {"tool": {"name": choice}}
    return config  # "auto" is the default and is left out


def _to_wire_tool(tool: ToolDefinition) -> Json:
    spec: Json = {"name": tool.name, "inputSchema": {"json": tool.parameters}}
    if tool.description:  # Converse rejects an empty description
        spec["description"] = tool.description
    if tool.strict:
        spec["strict"] = True
    return {"toolSpec": spec}


class _History(BlockHistory):
    provider = PROVIDER
    label = "Bedrock"
    empty_tool_id = "tooluse_empty"

    def text(self, text: str) -> Json:
        return {"text": text}

    def reasoning(self, part: ReasoningPart) -> Json | None:
        if part.redacted_data is not None:
            return {"reasoningContent": {"redactedContent": part.redacted_data}}
        if not part.text and not part.signature:
            return None
        reasoning: Json = {"text": part.text}
        if part.signature:
            reasoning["signature"] = part.signature
        return {"reasoningContent": {"reasoningText": reasoning}}

    def tool_use(self, part: ToolCallPart, *, own: bool) -> Json | None:
        if part.provider_executed:
            return None  # calls another provider executed itself cannot be replayed here, nor their results
        return {
            "toolUse": {
                "toolUseId": self.tool_id(part.tool_call_id),
                "name": part.tool_name,
                "input": tool_input(part),
            }
        }

    def tool_result(self, part: ToolResultPart) -> Json:
        items = content_items(part.output)
        if items is not None:  # an MCP tool's images, documents and resources: Converse's own blocks
            content = blocks(items, self.label, self.text, lambda media: self.file(media.file()))
        elif isinstance(part.output, dict):
            content = [{"json": part.output}]
        else:
            content = [{"text": part.output_text()}]
        return {
            "toolResult": {
                "toolUseId": self.tool_id(part.tool_call_id),
                "content": content,
                "status": "error" if part.is_error else "success",
            }
        }

    def file(self, part: FilePart) -> Json:
        source = _to_wire_source(part)
        image_format = _IMAGE_FORMATS.get(part.media_type)
        if image_format is not None:
            return {"image": {"format": image_format, "source": source}}
        document_format = _DOCUMENT_FORMATS.get(part.media_type)
        if document_format is not None:
            name = _DOCUMENT_NAME_UNSAFE.sub("-", part.filename or "document").strip() or "document"
            return {"document": {"format": document_format, "name": name, "source": source}}
        raise UnsupportedContentError(f"Bedrock Converse does not accept {part.media_type} files")


def _to_wire_source(part: FilePart) -> Json:
    if part.data is not None:
        return {"bytes": part.data}
    if part.url is not None and part.url.startswith("s3://"):
        return {"s3Location": {"uri": part.url}}
    raise UnsupportedContentError("Bedrock Converse takes files as inline data or s3:// URLs only")


__all__ = ["ROUND_TRIP_METADATA", "build_body"]
