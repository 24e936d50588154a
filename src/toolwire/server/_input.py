"""What clients send, checked before any work is done: the limits, JSON bodies, session ids, stream cursors
and paging parameters. Anything malformed or over a limit raises :class:`~toolwire.server.errors.RequestError`.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any, TypeVar

from starlette.requests import Request

from toolwire._text import clean_json
from toolwire.server.errors import RequestError
from toolwire.store.records import SessionInfo
from toolwire.tools.pending import Approval, DecisionKey, Denied, ShownCall, ToolFailed

T = TypeVar("T")
SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:~-]{0,199}")
_CURSOR = re.compile(r"[0-9]{1,18}")  # ASCII digits only: str.isdigit() also accepts "²" and "١"


class Limits:
    """The server's limits; a request over one is refused (413, 408 or 400) before any work is done."""

    def __init__(
        self,
        *,
        max_body_bytes: int = 1_000_000,
        max_messages: int = 1_000,
        max_prompt_chars: int = 100_000,
        ping_interval: float = 15.0,
        max_json_depth: int = 64,
        body_timeout: float = 30.0,
        header_timeout: float = 10.0,
        max_connections: int | None = None,
        shutdown_timeout: float = 10.0,
    ) -> None:
        self.max_body_bytes = max_body_bytes
        self.max_messages = max_messages
        self.max_prompt_chars = max_prompt_chars
        self.ping_interval = ping_interval
        """Seconds between keep-alive comments on a quiet stream (a tool is running)."""
        self.max_json_depth = max_json_depth
        """Deeper JSON is refused with 400 (deep nesting would exhaust recursion further on)."""
        self.body_timeout = body_timeout
        """Seconds a client may take to send a request body (408 after)."""
        self.header_timeout = header_timeout
        """Seconds a connection may take to send a request head (``toolwire serve``)."""
        self.max_connections = max_connections
        """Open connections at most (``toolwire serve``); ``None``: 1,000, less under a low fd limit."""
        self.shutdown_timeout = shutdown_timeout
        """Seconds SIGTERM waits for runs to be cancelled and streams to close."""


def check_session_id(raw: Any) -> str:
    """A session id from a path, body or message."""
    if not isinstance(raw, str) or not SESSION_ID.fullmatch(raw):
        raise RequestError("a session id is 1-200 characters of letters, digits and . _ : ~ -")
    return raw


async def read_json(request: Request, limits: Limits) -> Any:
    """The request's JSON body, within the size and time limits."""
    media_type = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media_type != "application/json":
        # A form or text/plain POST needs no CORS preflight: JSON endpoints accept JSON only.
        raise RequestError(
            "the body must be JSON (content-type: application/json)",
            status=415,
            kind="unsupported_media_type",
        )
    too_large = RequestError(f"request body over {limits.max_body_bytes} bytes", status=413, kind="too_large")
    declared = request.headers.get("content-length")
    if (
        declared is not None
        and declared.isascii()
        and declared.isdigit()
        and int(declared) > limits.max_body_bytes
    ):
        raise too_large
    body = bytearray()
    try:
        async with asyncio.timeout(limits.body_timeout):
            async for chunk in request.stream():
                body += chunk
                if len(body) > limits.max_body_bytes:
                    raise too_large
    except TimeoutError:
        raise RequestError(
            f"the request body took over {limits.body_timeout:g}s", status=408, kind="timeout"
        ) from None
    return parse_json(bytes(body), limits)


def parse_json(raw: bytes | str, limits: Limits) -> Any:
    """JSON from a client: depth-limited, lone surrogates cleaned (stored as-is they would make every later
    request unencodable)."""
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise RequestError(f"the body is not JSON: {exc}") from exc
    if _deeper_than(data, limits.max_json_depth):
        raise RequestError(f"JSON nested deeper than {limits.max_json_depth} levels")
    return clean_json(data)


def check_prompt(text: Any, limits: Limits) -> str:
    """A user message's text: non-empty, within ``limits.max_prompt_chars``."""
    if not isinstance(text, str) or not text.strip():
        raise RequestError("'text' must be a non-empty string")
    if len(text) > limits.max_prompt_chars:
        raise RequestError(f"message over {limits.max_prompt_chars} characters", status=413, kind="too_large")
    return text


def parse_answers(body: dict[str, Any]) -> tuple[dict[DecisionKey, Approval], dict[DecisionKey, Any]]:
    """``approvals`` / ``tool_outputs`` of a resume, keyed by ``tool_call_id``: an approval is ``true``,
    ``false`` or ``{"denied": "reason"}``; an output is any JSON value, or ``{"failed": "message"}``;
    ``message_ids`` (``{tool_call_id: message_id}``, from ``awaiting`` / ``tool-call-awaiting``) binds an
    answer to the call it was shown for."""
    approvals: dict[DecisionKey, Approval] = {}
    for key, value in _answer_map(body, "approvals").items():
        if isinstance(value, bool):
            approvals[key] = value
        elif isinstance(value, dict) and set(value) == {"denied"} and isinstance(value["denied"], str):
            approvals[key] = Denied(value["denied"])
        else:
            raise RequestError(f'the approval of {key!r} must be true, false or {{"denied": "reason"}}')
    outputs: dict[DecisionKey, Any] = {}
    for key, value in _answer_map(body, "tool_outputs").items():
        if isinstance(value, dict) and set(value) == {"failed"}:
            if not isinstance(value["failed"], str):
                raise RequestError(f'the failure of {key!r} must be {{"failed": "message"}}')
            outputs[key] = ToolFailed(value["failed"])
        else:
            outputs[key] = value
    return _bound(body, approvals), _bound(body, outputs)


def _bound(body: dict[str, Any], answers: dict[DecisionKey, T]) -> dict[DecisionKey, T]:
    """Answers keyed by a ``ShownCall`` where ``message_ids`` names the message each call was shown with:
    a model may reuse an id after an edit, and an answer bound to the old call is then refused (409)."""
    shown = body.get("message_ids")
    if shown is None:
        return answers
    if not isinstance(shown, dict) or not all(
        isinstance(v, str) and 0 < len(v) <= 200 for v in shown.values()
    ):
        raise RequestError("'message_ids' must be an object of tool_call_id: message_id")
    return {
        ShownCall(key, message_id=shown[key]) if isinstance(key, str) and key in shown else key: value
        for key, value in answers.items()
    }


def _answer_map(body: dict[str, Any], name: str) -> dict[str, Any]:
    raw = body.get(name)
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not all(isinstance(k, str) and 0 < len(k) <= 200 for k in raw):
        raise RequestError(f"'{name}' must be an object keyed by tool_call_id")
    return raw


def stream_cursor(raw: str | None) -> int | None:
    """A ``Last-Event-ID`` / ``after`` value."""
    if raw is None or raw == "":
        return None
    if not _CURSOR.fullmatch(raw):
        raise RequestError("Last-Event-ID / after must be a stream cursor (a non-negative integer)")
    return int(raw)


def int_param(raw: str | None, *, default: int, low: int, high: int, name: str) -> int:
    """A whole-number query parameter from ``low`` to ``high``; ``default`` when absent."""
    if raw is None or raw == "":
        return default
    if not _CURSOR.fullmatch(raw) or not low <= int(raw) <= high:
        raise RequestError(f"{name} must be a whole number from {low} to {high}")
    return int(raw)


def make_page_cursor(info: SessionInfo) -> str:
    """The ``next_cursor`` after ``info``, the last session of a page (read back by :func:`page_cursor`)."""
    return f"{info.updated_at!r}~{info.id}"


def page_cursor(raw: str | None) -> tuple[float, str] | None:
    """``updated_at~id`` of the last session of the previous page (keyset paging: stable under inserts)."""
    if raw is None or raw == "":
        return None
    stamp, sep, last_id = raw.partition("~")
    try:
        updated_at = float(stamp)
    except ValueError:
        updated_at = float("nan")
    if not sep or updated_at != updated_at or not SESSION_ID.fullmatch(last_id):
        raise RequestError("cursor must be the next_cursor of a previous page")
    return updated_at, last_id


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether parsed JSON nests containers deeper than ``limit`` (iterative: no recursion to exhaust)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        for child in children:
            if isinstance(child, dict | list):
                if depth + 1 > limit:
                    return True
                stack.append((child, depth + 1))
    return False
