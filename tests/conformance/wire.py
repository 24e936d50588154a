"""A loopback HTTP server speaking five providers' streaming wire formats for one shared scenario.

Turn 1: reasoning, streamed text, then two parallel calls get_weather / get_time (Paris); the first call
carries that provider's own metadata. Turn 2: the answer. Turn 3: the follow-up answer. Every request
body is recorded so tests can check what each adapter sent.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import time
from dataclasses import dataclass
from typing import Any

from tests.models.eventstream import frame

REASONING = ["Need weather ", "and time."]
TEXT = ["Let me ", "look both ", "up."]
CALLS = [("get_weather", ['{"city"', ':"Par', 'is"}']), ("get_time", ['{"ci', 'ty":"Paris"}'])]
ANSWERS = ["Paris: 21°C, 14:00.", "It was 21°C."]
SIGNATURE = "c2lnbmF0dXJlLWZvci1jYWxsLTE="  # base64 of "signature-for-call-1"


def _sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


# -- OpenAI Chat Completions --------------------------------------------------------------------


def openai_chat(turn: int) -> list[bytes]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return _sse({"id": f"chatcmpl-{turn}", "object": "chat.completion.chunk", "model": "conf-model",
                     "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})  # fmt: skip

    usage = {"id": f"chatcmpl-{turn}", "object": "chat.completion.chunk", "model": "conf-model", "choices": [],
             "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}  # fmt: skip
    if turn > 0:
        return [chunk({"role": "assistant", "content": ""}), chunk({"content": ANSWERS[turn - 1]}),
                chunk({}, "stop"), _sse(usage), b"data: [DONE]\n\n"]  # fmt: skip
    frames = [chunk({"role": "assistant", "content": None})]
    frames += [chunk({"reasoning_content": r}) for r in REASONING]
    frames += [chunk({"content": t}) for t in TEXT]
    for index, (name, fragments) in enumerate(CALLS):
        head: dict[str, Any] = {"index": index, "id": f"call_{name}", "type": "function",
                                "function": {"name": name, "arguments": ""}}  # fmt: skip
        if index == 0:
            head["extra_content"] = {"google": {"thought_signature": SIGNATURE}}
        frames.append(chunk({"tool_calls": [head]}))
        frames += [chunk({"tool_calls": [{"index": index, "function": {"arguments": f}}]}) for f in fragments]
    return [*frames, chunk({}, "tool_calls"), _sse(usage), b"data: [DONE]\n\n"]


# -- OpenAI Responses -------------------------------------------------------------------------------


def openai_responses(turn: int) -> list[bytes]:
    usage = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
    frames = [_sse({"type": "response.created", "response": {"id": f"resp_{turn}", "status": "in_progress", "output": []}},
                   "response.created")]  # fmt: skip
    output: list[dict[str, Any]] = []
    pos = 0

    def message(text_parts: list[str]) -> None:
        nonlocal pos
        item = {
            "type": "message",
            "id": f"msg_{turn}",
            "role": "assistant",
            "status": "in_progress",
            "content": [],
        }
        frames.append(
            _sse(
                {"type": "response.output_item.added", "output_index": pos, "item": item},
                "response.output_item.added",
            )
        )
        for t in text_parts:
            frames.append(_sse({"type": "response.output_text.delta", "item_id": item["id"], "output_index": pos,
                                "content_index": 0, "delta": t}, "response.output_text.delta"))  # fmt: skip
        done = {**item, "status": "completed",
                "content": [{"type": "output_text", "text": "".join(text_parts), "annotations": []}]}  # fmt: skip
        frames.append(
            _sse(
                {"type": "response.output_item.done", "output_index": pos, "item": done},
                "response.output_item.done",
            )
        )
        output.append(done)
        pos += 1

    if turn == 0:
        reasoning = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "ENC-early"}
        frames.append(
            _sse(
                {"type": "response.output_item.added", "output_index": pos, "item": reasoning},
                "response.output_item.added",
            )
        )
        for r in REASONING:
            frames.append(_sse({"type": "response.reasoning_summary_text.delta", "item_id": "rs_1", "output_index": pos,
                                "summary_index": 0, "delta": r}, "response.reasoning_summary_text.delta"))  # fmt: skip
        done_r = {**reasoning, "encrypted_content": "ENC-final",
                  "summary": [{"type": "summary_text", "text": "".join(REASONING)}]}  # fmt: skip
        frames.append(
            _sse(
                {"type": "response.output_item.done", "output_index": pos, "item": done_r},
                "response.output_item.done",
            )
        )
        output.append(done_r)
        pos += 1
        message(TEXT)
        for name, fragments in CALLS:
            item = {"type": "function_call", "id": f"fc_{name}", "call_id": f"call_{name}", "name": name,
                    "arguments": "", "status": "in_progress"}  # fmt: skip
            frames.append(
                _sse(
                    {"type": "response.output_item.added", "output_index": pos, "item": item},
                    "response.output_item.added",
                )
            )
            for f in fragments:
                frames.append(_sse({"type": "response.function_call_arguments.delta", "item_id": item["id"],
                                    "output_index": pos, "delta": f}, "response.function_call_arguments.delta"))  # fmt: skip
            args = "".join(fragments)
            frames.append(_sse({"type": "response.function_call_arguments.done", "item_id": item["id"],
                                "output_index": pos, "arguments": args}, "response.function_call_arguments.done"))  # fmt: skip
            done = {**item, "arguments": args, "status": "completed"}
            frames.append(
                _sse(
                    {"type": "response.output_item.done", "output_index": pos, "item": done},
                    "response.output_item.done",
                )
            )
            output.append(done)
            pos += 1
    else:
        message([ANSWERS[turn - 1]])
    completed = {
        "id": f"resp_{turn}",
        "status": "completed",
        "output": output,
        "usage": usage,
        "model": "conf-model",
    }
    frames.append(_sse({"type": "response.completed", "response": completed}, "response.completed"))
    return frames


# -- Anthropic Messages ----------------------------------------------------------------------------------


def anthropic(turn: int) -> list[bytes]:
    frames = [_sse({"type": "message_start", "message": {"id": f"msg_{turn}", "type": "message", "role": "assistant",
                    "model": "conf-model", "content": [], "usage": {"input_tokens": 10, "output_tokens": 1}}},
                   "message_start")]  # fmt: skip

    def block(index: int, start: dict[str, Any], deltas: list[dict[str, Any]]) -> None:
        frames.append(
            _sse(
                {"type": "content_block_start", "index": index, "content_block": start}, "content_block_start"
            )
        )
        for d in deltas:
            frames.append(
                _sse({"type": "content_block_delta", "index": index, "delta": d}, "content_block_delta")
            )
        frames.append(_sse({"type": "content_block_stop", "index": index}, "content_block_stop"))

    if turn == 0:
        block(0, {"type": "thinking", "thinking": "", "signature": ""},
              [{"type": "thinking_delta", "thinking": r} for r in REASONING]
              + [{"type": "signature_delta", "signature": SIGNATURE}])  # fmt: skip
        block(1, {"type": "text", "text": ""}, [{"type": "text_delta", "text": t} for t in TEXT])
        frames.append(_sse({"type": "ping"}, "ping"))
        for i, (name, fragments) in enumerate(CALLS):
            block(2 + i, {"type": "tool_use", "id": f"toolu_{name}", "name": name, "input": {}},
                  [{"type": "input_json_delta", "partial_json": ""}]
                  + [{"type": "input_json_delta", "partial_json": f} for f in fragments])  # fmt: skip
        stop = "tool_use"
    else:
        block(0, {"type": "text", "text": ""}, [{"type": "text_delta", "text": ANSWERS[turn - 1]}])
        stop = "end_turn"
    frames.append(_sse({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                        "usage": {"output_tokens": 5}}, "message_delta"))  # fmt: skip
    frames.append(_sse({"type": "message_stop"}, "message_stop"))
    return frames


# -- Gemini ------------------------------------------------------------------------------------------------


def gemini(turn: int) -> list[bytes]:
    def chunk(parts: list[dict[str, Any]], finish: str | None = None) -> bytes:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        if finish:
            candidate["finishReason"] = finish
        body = {"candidates": [candidate], "modelVersion": "conf-model", "responseId": f"resp_{turn}",
                "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}}  # fmt: skip
        return f"data: {json.dumps(body)}\r\n\r\n".encode()

    if turn > 0:
        return [chunk([{"text": ANSWERS[turn - 1]}], "STOP")]
    frames = [chunk([{"text": r, "thought": True}]) for r in REASONING]
    frames += [chunk([{"text": t}]) for t in TEXT]
    calls = []
    for i, (name, fragments) in enumerate(CALLS):
        part: dict[str, Any] = {
            "functionCall": {"name": name, "args": json.loads("".join(fragments)), "id": f"g_{name}"}
        }
        if i == 0:
            part["thoughtSignature"] = SIGNATURE
        calls.append(part)
    return [*frames, chunk(calls), chunk([{"text": ""}], "STOP")]


# -- Bedrock ConverseStream (binary event stream, encoded here for the test server only) ------------------


def _event(event_type: str, payload: dict[str, Any]) -> bytes:
    headers = {":event-type": event_type, ":content-type": "application/json", ":message-type": "event"}
    return frame(headers, json.dumps({**payload, "p": "abcdefgh"}).encode())


def bedrock(turn: int) -> list[bytes]:
    frames = [_event("messageStart", {"role": "assistant"})]
    if turn == 0:
        frames += [
            _event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": r}}})
            for r in REASONING
        ]
        frames.append(
            _event(
                "contentBlockDelta",
                {"contentBlockIndex": 0, "delta": {"reasoningContent": {"signature": SIGNATURE}}},
            )
        )
        frames.append(_event("contentBlockStop", {"contentBlockIndex": 0}))
        frames += [_event("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"text": t}}) for t in TEXT]
        frames.append(_event("contentBlockStop", {"contentBlockIndex": 1}))
        for i, (name, fragments) in enumerate(CALLS):
            index = 2 + i
            frames.append(_event("contentBlockStart", {"contentBlockIndex": index,
                                                        "start": {"toolUse": {"toolUseId": f"tooluse_{name}", "name": name}}}))  # fmt: skip
            frames += [
                _event("contentBlockDelta", {"contentBlockIndex": index, "delta": {"toolUse": {"input": f}}})
                for f in fragments
            ]
            frames.append(_event("contentBlockStop", {"contentBlockIndex": index}))
        stop = "tool_use"
    else:
        frames.append(
            _event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": ANSWERS[turn - 1]}})
        )
        frames.append(_event("contentBlockStop", {"contentBlockIndex": 0}))
        stop = "end_turn"
    frames.append(_event("messageStop", {"stopReason": stop}))
    frames.append(
        _event(
            "metadata",
            {"usage": {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15}, "metrics": {"latencyMs": 1}},
        )
    )
    return frames


# -- Claude on Bedrock (InvokeModelWithResponseStream): each Anthropic event base64 in a `chunk` frame ----------


def anthropic_on_bedrock(turn: int) -> list[bytes]:
    events = [line[len("data: ") :] for sse in anthropic(turn) for line in sse.decode().splitlines()]
    return [
        _event("chunk", {"bytes": base64.b64encode(e.encode()).decode()}) for e in events if e.startswith("{")
    ]


ROUTES = {
    "/v1/chat/completions": ("openai-chat", openai_chat, "text/event-stream"),
    "/v1/responses": ("openai-responses", openai_responses, "text/event-stream"),
    "/v1/messages": ("anthropic", anthropic, "text/event-stream"),
    ":streamGenerateContent": ("gemini", gemini, "text/event-stream"),
    "/converse-stream": ("bedrock", bedrock, "application/vnd.amazon.eventstream"),
    ":streamRawPredict": ("anthropic-vertex", anthropic, "text/event-stream"),
    "/invoke-with-response-stream": (
        "anthropic-bedrock",
        anthropic_on_bedrock,
        "application/vnd.amazon.eventstream",
    ),
}


@dataclass(frozen=True)
class Fault:
    """How one response misbehaves, at the byte level."""

    status: int | None = None
    """Answer with this HTTP error status (a JSON error body) instead of the stream."""
    cut_headers: bool = False
    """Close the connection halfway through the response headers."""
    cut_before: bytes | None = None
    """Close the connection, the chunked body unterminated, before the first frame containing these bytes
    (``b""``: before the first frame, right after the headers)."""
    inside: bool = False
    """Send the first half of that frame's bytes before closing."""


class WireServer:
    """Real HTTP/1.1 on 127.0.0.1; answers each provider's n-th request with turn n of the scenario, or
    with the :class:`Fault` that ``faults[provider][n]`` names."""

    def __init__(self, faults: dict[str, dict[int, Fault]] | None = None) -> None:
        self.faults = faults or {}
        self.requests: dict[str, list[dict[str, Any]]] = {}
        self.paths: dict[str, list[str]] = {}
        self.arrivals: dict[str, list[float]] = {}
        """Each provider's requests' ``time.monotonic()`` on arrival."""
        self.port = 0
        self._server: asyncio.Server | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> WireServer:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._server.wait_closed(), 5)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
            path = head.split(" ", 2)[1]
            length = next(
                (
                    int(line.split(":", 1)[1])
                    for line in head.split("\r\n")
                    if line.lower().startswith("content-length:")
                ),
                0,
            )
            body = json.loads(await reader.readexactly(length)) if length else {}
            route = next((r for key, r in ROUTES.items() if key in path.split("?")[0]), None)
            if route is None:
                writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                return
            provider, frames_for, content_type = route
            self.requests.setdefault(provider, []).append(body)
            self.arrivals.setdefault(provider, []).append(time.monotonic())
            self.paths.setdefault(provider, []).append(path)
            turn = len(self.requests[provider]) - 1
            fault = self.faults.get(provider, {}).get(turn)
            if fault is not None and fault.status is not None:
                error = json.dumps({"error": {"message": "injected", "type": "injected_error"}}).encode()
                writer.write(
                    f"HTTP/1.1 {fault.status} Error\r\ncontent-type: application/json\r\n"
                    f"content-length: {len(error)}\r\nconnection: close\r\n\r\n".encode()
                    + error
                )
                await writer.drain()
                return
            head = (
                f"HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ntransfer-encoding: chunked\r\n"
                "connection: close\r\n\r\n".encode()
            )
            if fault is not None and fault.cut_headers:
                writer.write(head[: len(head) // 2])
                await writer.drain()
                return
            writer.write(head)
            for frame in frames_for(turn):
                if fault is not None and fault.cut_before is not None and fault.cut_before in frame:
                    if fault.inside:
                        half = frame[: len(frame) // 2]
                        writer.write(f"{len(frame):x}\r\n".encode() + half)
                        await writer.drain()
                    return
                writer.write(f"{len(frame):x}\r\n".encode() + frame + b"\r\n")
                await writer.drain()
            writer.write(b"0\r\n\r\n")
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
