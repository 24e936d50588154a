"""Gemini ``GenerateContentResponse`` chunks -> canonical stream parts.

Streaming and non-streaming responses go through the same reader: a non-streaming response is one chunk.

Part boundaries. A streamed text or thought part arrives as fragments, one per chunk. A fragment continues
the open part when it is the first part of its chunk, of the same kind (``thought`` or not) and carries no
``thoughtSignature``; anything else starts a new part. A signature therefore always sits on the part it
arrived on (https://ai.google.dev/gemini-api/docs/thought-signatures: never merge a signed part into another
one): Gemini 2.5 signs the first text fragment, which becomes the head of one signed text part; Gemini 3
often ends with an *empty* signed text part, which is kept as its own (empty) ``TextPart`` so it can be sent
back. Empty unsigned fragments (the usual finish chunk) carry nothing and are skipped.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from toolwire.errors import ProviderError, ProviderProtocolError
from toolwire.messages import ProviderMetadata, Usage, new_id
from toolwire.models._builder import TextKind, text_delta, text_end, text_start, whole_tool_input
from toolwire.models._http import Json, protocol_error
from toolwire.models._window import as_context_length
from toolwire.models.base import (
    File,
    Finish,
    FinishReason,
    ModelStreamPart,
    ResponseMetadata,
    StreamError,
    ToolInputDelta,
    ToolInputEnd,
    ToolInputStart,
    ToolResult,
)
from toolwire.models.gemini._args import StreamedArgs, parse_json_path

PROVIDER = "google"
CODE_EXECUTION = "code_execution"
"""Tool name for Gemini's built-in code execution (``executableCode`` / ``codeExecutionResult`` parts)."""

# https://ai.google.dev/api/generate-content#FinishReason
_FINISH: dict[str, FinishReason] = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content-filter",
    "RECITATION": "content-filter",
    "BLOCKLIST": "content-filter",
    "PROHIBITED_CONTENT": "content-filter",
    "SPII": "content-filter",
    "IMAGE_SAFETY": "content-filter",
    "IMAGE_PROHIBITED_CONTENT": "content-filter",
    "IMAGE_RECITATION": "content-filter",
    "MALFORMED_FUNCTION_CALL": "error",
    "UNEXPECTED_TOOL_CALL": "error",
    "TOO_MANY_TOOL_CALLS": "error",
    "MISSING_THOUGHT_SIGNATURE": "error",
}
# Status names Google uses for transient failures (https://cloud.google.com/apis/design/errors).
RETRYABLE_STATUS = frozenset(
    {"UNAVAILABLE", "INTERNAL", "RESOURCE_EXHAUSTED", "DEADLINE_EXCEEDED", "ABORTED"}
)
_RETRYABLE_CODES = frozenset({408, 429, 500, 502, 503, 504})


def signature_metadata(part: dict[str, Any]) -> ProviderMetadata:
    """``{"google": {"thoughtSignature": ...}}`` for a signed wire part, stored exactly as received."""
    signature = part.get("thoughtSignature", part.get("thought_signature"))
    return {PROVIDER: {"thoughtSignature": signature}} if isinstance(signature, str) and signature else {}


def error_from_body(body: Json, *, model: str) -> ProviderError:
    """An ``{"error": {code, message, status}}`` element found inside a 200 response."""
    error = body.get("error")
    error = error if isinstance(error, dict) else {"message": str(error)}
    status, code = error.get("status"), error.get("code")
    return as_context_length(
        ProviderProtocolError(
            str(error.get("message") or "error in response stream"),
            provider=PROVIDER,
            model=model,
            status=code if isinstance(code, int) else None,
            code=str(status or code) if (status or code) is not None else None,
            retryable=status in RETRYABLE_STATUS or code in _RETRYABLE_CODES,
            body=body,
        )
    )


def usage_from(metadata: dict[str, Any] | None) -> Usage:
    """``usageMetadata`` -> Usage. Thoughts are billed as output, so ``output_tokens`` includes them (as on
    OpenAI and Anthropic); ``candidatesTokenCount`` alone excludes them. What a built-in tool (Google
    Search, URL context) put in the prompt is ``toolUsePromptTokenCount``, outside ``promptTokenCount`` and
    billed as input: it counts in ``input_tokens``, so input plus output is ``totalTokenCount``."""
    if not metadata:
        return Usage(requests=1)
    thoughts = int(metadata.get("thoughtsTokenCount") or 0)
    tool_prompt = int(metadata.get("toolUsePromptTokenCount") or 0)
    return Usage(
        input_tokens=int(metadata.get("promptTokenCount") or 0) + tool_prompt,
        output_tokens=int(metadata.get("candidatesTokenCount") or 0) + thoughts,
        reasoning_tokens=thoughts,
        cache_read_tokens=int(metadata.get("cachedContentTokenCount") or 0),
        requests=1,
    )


@dataclass(slots=True)
class _OpenCall:
    """A Vertex streamed-arguments call between ``{name, willContinue}`` and its end."""

    id: str
    name: str
    metadata: ProviderMetadata
    args: StreamedArgs = field(default_factory=StreamedArgs)


@dataclass(slots=True)
class _OpenText:
    kind: TextKind
    id: str


class ResponseReader:
    """Feed it response chunks in order; it yields canonical stream parts. Call :meth:`finish` at the end."""

    def __init__(self, *, model: str) -> None:
        self._model = model
        self._ids = itertools.count()
        self._call_index = itertools.count()
        self._text: _OpenText | None = None
        self._call: _OpenCall | None = None
        self._code_call_id: str | None = None
        self._response_id: str | None = None
        self._metadata_sent = False
        self._client_calls = False
        self._raw_finish: str | None = None
        self._usage: dict[str, Any] | None = None
        self._extra: dict[str, Any] = {}
        self._blocked = False
        self.done = False
        """Set by an error: nothing after it is read."""

    # -- chunks -----------------------------------------------------------------------------------------

    def feed(self, chunk: Json) -> list[ModelStreamPart]:
        out: list[ModelStreamPart] = []
        if "error" in chunk:
            self.done = True
            out.extend(self._close_all())
            out.append(StreamError(error=error_from_body(chunk, model=self._model)))
            return out
        if not self._metadata_sent and (chunk.get("responseId") or chunk.get("modelVersion")):
            self._metadata_sent = True
            self._response_id = chunk.get("responseId")
            out.append(ResponseMetadata(response_id=self._response_id, model=chunk.get("modelVersion")))
        if isinstance(chunk.get("usageMetadata"), dict):
            self._usage = chunk["usageMetadata"]
        feedback = chunk.get("promptFeedback")
        if isinstance(feedback, dict) and feedback.get("blockReason"):
            # The prompt itself was blocked: no candidates follow, whatever the reason's name.
            self._raw_finish = str(feedback["blockReason"])
            self._blocked = True
            self._extra["promptFeedback"] = feedback
        candidates = chunk.get("candidates") or []
        if not candidates or not isinstance(candidates[0], dict):
            return out
        candidate = candidates[0]
        content = candidate.get("content")
        parts = content.get("parts") if isinstance(content, dict) else None
        for index, part in enumerate(parts or []):
            if isinstance(part, dict):
                out.extend(self._part(part, first_in_chunk=index == 0))
        if candidate.get("finishReason"):
            self._raw_finish = str(candidate["finishReason"])
        for key in ("finishMessage", "groundingMetadata", "urlContextMetadata", "safetyRatings"):
            if candidate.get(key):
                self._extra[key] = candidate[key]
        return out

    def end(self) -> list[ModelStreamPart]:
        """Close every open part and report the finish (or the lack of one)."""
        out = self._close_all()
        if self._raw_finish is None:
            message = "the response ended without a finishReason"
            return [*out, protocol_error(message, provider=PROVIDER, model=self._model, retryable=True)]
        reason = "content-filter" if self._blocked else _FINISH.get(self._raw_finish, "other")
        if reason == "stop" and self._client_calls:
            reason = "tool-calls"  # Gemini says STOP after function calls; the loop needs to know to run them
        metadata = dict(self._extra)
        if self._usage:
            metadata["usageMetadata"] = self._usage
        out.append(
            Finish(
                reason=reason,
                raw_reason=self._raw_finish,
                usage=usage_from(self._usage),
                provider_metadata={PROVIDER: metadata} if metadata else {},
            )
        )
        return out

    # -- parts ------------------------------------------------------------------------------------------

    def _part(self, part: dict[str, Any], *, first_in_chunk: bool) -> list[ModelStreamPart]:
        if "functionCall" in part or "function_call" in part:
            call = part.get("functionCall", part.get("function_call"))
            return [*self._close_text(), *self._function_call(call if isinstance(call, dict) else {}, part)]
        if "text" in part or part.get("thought"):
            return self._text_fragment(part, first_in_chunk=first_in_chunk)
        if isinstance(part.get("inlineData"), dict):
            blob = part["inlineData"]
            # File stream parts carry no metadata, so a signature on an inline image cannot round-trip.
            return [
                *self._close_all(),
                File(media_type=str(blob.get("mimeType", "")), data=str(blob.get("data", ""))),
            ]
        if isinstance(part.get("executableCode"), dict):
            return [*self._close_all(), *self._executable_code(part)]
        if isinstance(part.get("codeExecutionResult"), dict):
            return [*self._close_all(), *self._code_result(part)]
        return []  # a part kind toolwire does not model (e.g. videoMetadata): nothing to replay

    def _text_fragment(self, part: dict[str, Any], *, first_in_chunk: bool) -> list[ModelStreamPart]:
        kind: TextKind = "reasoning" if part.get("thought") else "text"
        text = part.get("text") or ""
        metadata = signature_metadata(part)
        if not text and not metadata:
            return []
        out: list[ModelStreamPart] = []
        if self._call is not None:
            out.extend(self._close_call())
        current = self._text
        if current is None or current.kind != kind or metadata or not first_in_chunk:
            out.extend(self._close_text())
            current = self._text = _OpenText(kind=kind, id=f"{kind[0]}{next(self._ids)}")
            out.append(text_start(kind, current.id, metadata))
        if text:
            out.append(text_delta(kind, current.id, text))
        return out

    def _close_text(self) -> list[ModelStreamPart]:
        current, self._text = self._text, None
        return [] if current is None else [text_end(current.kind, current.id)]

    def _close_all(self) -> list[ModelStreamPart]:
        return [*self._close_text(), *self._close_call()]

    def _new_call_id(self, server_id: Any = None) -> str:
        """The server's id when it sent one, else a stable one derived from the response id and the call's
        position, so a response gets the same ids streamed or not (older Gemini API models send no id; the
        API accepts client ids on the way back)."""
        index = next(self._call_index)
        if server_id:
            return str(server_id)
        if self._response_id is None:
            self._response_id = new_id()
        return f"call_{self._response_id}_{index}"

    def _function_call(self, call: dict[str, Any], part: dict[str, Any]) -> list[ModelStreamPart]:
        name = call.get("name")
        if not name:
            # Continuation of a streamed call: partialArgs, a bare willContinue, or the `{}` terminator.
            if self._call is None:
                return []
            if late := signature_metadata(part):  # not seen so far, but it would belong to this call
                self._call.metadata = late
            out = self._partial_args(call.get("partialArgs"))
            if not call.get("willContinue"):
                out.extend(self._close_call())
            return out
        out = self._close_call()
        self._client_calls = True
        call_id = self._new_call_id(call.get("id"))
        metadata = signature_metadata(part)
        out.append(ToolInputStart(tool_call_id=call_id, tool_name=name, provider_metadata=metadata))
        if not call.get("willContinue") and not call.get("partialArgs"):
            return [
                *out,
                *whole_tool_input(call_id, name, call.get("args") or {}, provider_metadata=metadata),
            ]
        self._call = _OpenCall(id=call_id, name=name, metadata=metadata)
        if isinstance(call.get("args"), dict):
            out.extend(self._values(self._call, [], call["args"]))
        out.extend(self._partial_args(call.get("partialArgs")))
        if not call.get("willContinue"):
            out.extend(self._close_call())
        return out

    def _partial_args(self, fragments: Any) -> list[ModelStreamPart]:
        call = self._call
        if call is None or not isinstance(fragments, list):
            return []
        out: list[ModelStreamPart] = []
        for fragment in fragments:
            if not isinstance(fragment, dict):
                continue
            raw_path = str(fragment.get("jsonPath", "$"))
            path = [] if raw_path == "$" else parse_json_path(raw_path)
            if path is None:  # an unfamiliar path shape: keep the value under the path text
                path = [raw_path.removeprefix("$.")]
            if "stringValue" in fragment:
                delta = call.args.add(
                    path,
                    str(fragment["stringValue"]),
                    is_string=True,
                    will_continue=bool(fragment.get("willContinue")),
                )
                out.extend(self._delta(call, delta))
                continue
            for key in ("numberValue", "boolValue", "structValue", "listValue", "nullValue"):
                if key in fragment:
                    value = None if key == "nullValue" else fragment[key]
                    out.extend(self._values(call, path, value))
                    break
        return out

    def _values(self, call: _OpenCall, path: list[str | int], value: Any) -> list[ModelStreamPart]:
        if not path:  # a whole object at the root: one fragment per key keeps the text appendable
            if not isinstance(value, dict):
                return []
            return [p for key, item in value.items() for p in self._values(call, [key], item)]
        is_string = isinstance(value, str)
        return self._delta(call, call.args.add(path, value, is_string=is_string, will_continue=False))

    @staticmethod
    def _delta(call: _OpenCall, text: str) -> list[ModelStreamPart]:
        return [ToolInputDelta(tool_call_id=call.id, delta=text)] if text else []

    def _close_call(self) -> list[ModelStreamPart]:
        call, self._call = self._call, None
        if call is None:
            return []
        out = self._delta(call, call.args.close())
        args, args_json = call.args.result()
        out.append(
            ToolInputEnd(
                tool_call_id=call.id,
                tool_name=call.name,
                args=args,
                args_json=args_json,
                provider_metadata=call.metadata,
            )
        )
        return out

    # -- built-in code execution (provider-executed) ----------------------------------------------------

    def _executable_code(self, part: dict[str, Any]) -> list[ModelStreamPart]:
        call_id = self._code_call_id = self._new_call_id()
        metadata = signature_metadata(part)
        start = ToolInputStart(
            tool_call_id=call_id, tool_name=CODE_EXECUTION, provider_metadata=metadata, provider_executed=True
        )
        code = part["executableCode"]
        inputs = whole_tool_input(
            call_id, CODE_EXECUTION, code, provider_metadata=metadata, provider_executed=True
        )
        return [start, *inputs]

    def _code_result(self, part: dict[str, Any]) -> list[ModelStreamPart]:
        call_id, self._code_call_id = self._code_call_id or self._new_call_id(), None
        return [
            ToolResult(
                tool_call_id=call_id,
                tool_name=CODE_EXECUTION,
                output=part["codeExecutionResult"],
                is_error=part["codeExecutionResult"].get("outcome") not in (None, "OUTCOME_OK"),
                provider_metadata=signature_metadata(part),
            )
        ]


__all__ = ["CODE_EXECUTION", "PROVIDER", "ResponseReader"]
