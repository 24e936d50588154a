"""Replay recorded provider traffic from ``tests/recordings`` through an ``httpx.MockTransport``.

Recordings are read, never edited (``tests/recordings/SOURCES.md`` says where each came from). VCR cassettes
give requests and responses; vercel ``*.chunks.txt`` files give responses only (one SSE data payload per line).
"""

from __future__ import annotations

import gzip
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

RECORDINGS = Path(__file__).resolve().parent / "recordings"
"""The recordings shipped with the repository."""

FIXTURES = Path(os.environ.get("TOOLWIRE_FIXTURES", RECORDINGS))
"""Where recordings are loaded from: ``TOOLWIRE_FIXTURES`` overrides the in-repository copy."""


@dataclass
class Interaction:
    method: str
    uri: str
    request_json: Any
    """The decoded request body (``None`` when there was none or it was not JSON)."""
    status: int
    headers: dict[str, str]
    body: bytes
    """The response body as the client would read it after content decoding."""


@dataclass
class Cassette:
    path: Path
    interactions: list[Interaction]
    sent: list[httpx.Request] = field(default_factory=list)

    def transport(self) -> httpx.MockTransport:
        """Answers the i-th request with the i-th recorded response, and records what was sent."""
        index = 0

        def handler(request: httpx.Request) -> httpx.Response:
            nonlocal index
            self.sent.append(request)
            if index >= len(self.interactions):
                raise AssertionError(f"{self.path.name}: unexpected request #{index + 1} to {request.url}")
            rec = self.interactions[index]
            index += 1
            return httpx.Response(rec.status, headers=rec.headers, content=rec.body)

        return httpx.MockTransport(handler)

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=self.transport())

    def sent_json(self, index: int, *, cache_marks: bool = False) -> Any:
        """The body of the ``index``-th request sent; without the prompt-cache marks toolwire adds by default
        (recordings predate them; ``tests/models/test_prompt_caching.py`` tests them) unless ``cache_marks``."""
        body = json.loads(self.sent[index].content)
        return body if cache_marks else without_cache_marks(body)


def without_cache_marks(body: Any) -> Any:
    """``body`` as sent with prompt caching off: no Anthropic ``cache_control``, no Bedrock ``cachePoint``
    block, no OpenAI ``prompt_cache_key``, and an Anthropic system prompt as the one string it was."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k != "cache_control"}
        if isinstance(value, list):
            return [strip(v) for v in value if not (isinstance(v, dict) and v.keys() == {"cachePoint"})]
        return value

    if not isinstance(body, dict):
        return body
    out = strip(body)
    out.pop("prompt_cache_key", None)
    system = out.get("system")
    if isinstance(system, list) and len(system) == 1 and system[0].get("type") == "text":
        out["system"] = system[0]["text"]
    return out


def _flat_headers(headers: dict[str, list[str]] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, values in (headers or {}).items():
        lower = key.lower()
        if lower in ("content-length", "transfer-encoding", "content-encoding"):
            continue  # describe the original transfer, not our replay
        out[lower] = values[0] if isinstance(values, list) else str(values)
    return out


def _decode_body(response: dict[str, Any]) -> bytes:
    if "parsed_body" in response:
        return json.dumps(response["parsed_body"]).encode()
    raw = response.get("body", {}).get("string", b"")
    data = raw.encode() if isinstance(raw, str) else bytes(raw)
    encoding = "".join(
        v[0] if isinstance(v, list) else v
        for k, v in (response.get("headers") or {}).items()
        if k.lower() == "content-encoding"
    )
    if "gzip" in encoding or data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return data


def _request_json(request: dict[str, Any]) -> Any:
    if "parsed_body" in request:
        return request["parsed_body"]
    body = request.get("body")
    if body is None:
        return None
    if isinstance(body, dict):
        body = body.get("string")
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    try:
        return json.loads(body) if body else None
    except ValueError:
        return None


def load(relative: str) -> Cassette:
    """Load a recording by its path under ``FIXTURES`` (``tests/recordings``)."""
    path = FIXTURES / relative
    if path.name.endswith(".chunks.txt"):
        return _load_chunks(path)
    data = yaml.safe_load(path.read_text())
    interactions = []
    for item in data["interactions"]:
        req, resp = item["request"], item["response"]
        interactions.append(
            Interaction(
                method=req.get("method", "POST"),
                uri=req.get("uri", ""),
                request_json=_request_json(req),
                status=int(resp["status"]["code"]),
                headers=_flat_headers(resp.get("headers")),
                body=_decode_body(resp),
            )
        )
    return Cassette(path, interactions)


def _load_chunks(path: Path, *, event_lines: bool = False) -> Cassette:
    frames = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        if event_lines:
            kind = json.loads(line).get("type", "message")
            frames.append(f"event: {kind}\ndata: {line}\n\n")
        else:
            frames.append(f"data: {line}\n\n")
    body = "".join(frames).encode()
    return Cassette(
        path,
        [Interaction("POST", "", None, 200, {"content-type": "text/event-stream"}, body)],
    )


def load_chunks_with_events(relative: str) -> Cassette:
    """A ``*.chunks.txt`` file replayed with ``event: <type>`` lines (the OpenAI Responses framing)."""
    return _load_chunks(FIXTURES / relative, event_lines=True)


def all_fixtures() -> list[str]:
    """Every recording under ``FIXTURES``, relative paths, sorted."""
    return sorted(
        str(p.relative_to(FIXTURES))
        for p in FIXTURES.rglob("*")
        if p.is_file() and (p.suffix == ".yaml" or p.name.endswith(".chunks.txt"))
    )
