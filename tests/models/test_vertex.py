"""Vertex AI with refreshing Google credentials: Gemini, and Claude through ``rawPredict`` /
``streamRawPredict``.

The credentials are real google-auth objects: a service-account file generated here with a throwaway RSA
key, whose ``token_uri`` is a token endpoint on loopback. google-auth's own refresh code signs the JWT grant
and posts it there; the endpoint checks the signature with the public key and hands out numbered tokens, so
the tests see which token each Vertex request carried. Vertex itself is an injected httpx transport
answering in the published formats (a recorded Anthropic stream for Claude). Claude's URL and body are
checked against what anthropic's own ``AnthropicVertex`` client sends for the same call, and the body
against ``MessageCreateParams``.
"""

from __future__ import annotations

import base64
import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from google.oauth2 import service_account

from tests.cassettes import load
from tests.models.canned import CannedServer
from tests.models.sdk_types import check_anthropic_on_platform, check_gemini
from toolwire.errors import ConfigError, ProviderConnectionError, ProviderHTTPError
from toolwire.messages import Message
from toolwire.models import infer_model
from toolwire.models._builder import collect
from toolwire.models.anthropic import AnthropicModel
from toolwire.models.anthropic.vertex import AnthropicVertexModel
from toolwire.models.base import ModelRequest, ResponseMetadata, StreamStart, ToolDefinition
from toolwire.models.gemini import GeminiModel

PROJECT = "toolwire-test"
CLAUDE = "claude-sonnet-4-5@20250929"
CLAUDE_STREAM = "openllmetry/packages/opentelemetry-instrumentation-anthropic/tests/cassettes/test_messages/test_anthropic_tools_streaming_legacy.yaml"
# One chunk of a streamed generateContent answer, in the published GenerateContentResponse shape.
GEMINI_SSE = (
    b'data: {"candidates":[{"content":{"role":"model","parts":[{"text":"hi"}]},"finishReason":"STOP"}],'
    b'"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":1,"totalTokenCount":4}}\r\n\r\n'
)
TOOLS = [ToolDefinition(name="get_weather", parameters={"type": "object", "properties": {}})]


# ---------------------------------------------------------------------------------------------
# A token endpoint on loopback and a service account whose key it knows


@dataclass
class TokenServer:
    url: str
    public_key: rsa.RSAPublicKey
    expires_in: int = 3600
    fail: bool = False
    grants: list[dict[str, Any]] = field(default_factory=list)


def _b64(segment: str) -> bytes:
    return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))


def _handler(server: TokenServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            form = parse_qs(self.rfile.read(int(self.headers["content-length"])).decode())
            header, claims, signature = form["assertion"][0].split(".")
            # The grant google-auth signed with the service account's private key (RS256).
            server.public_key.verify(
                _b64(signature), f"{header}.{claims}".encode(), padding.PKCS1v15(), hashes.SHA256()
            )
            server.grants.append({"grant_type": form["grant_type"][0], **json.loads(_b64(claims))})
            if server.fail:
                status, answer = (
                    400,
                    {"error": "invalid_grant", "error_description": "Invalid JWT Signature."},
                )
            else:
                token = f"ya29.token-{len(server.grants)}"
                status, answer = (
                    200,
                    {"access_token": token, "expires_in": server.expires_in, "token_type": "Bearer"},
                )
            payload = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


@pytest.fixture
def token_server() -> Iterator[TokenServer]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    server = TokenServer(url="", public_key=key.public_key())
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(server))
    server.url = f"http://127.0.0.1:{httpd.server_address[1]}/token"
    server.private_pem = key.private_bytes(  # type: ignore[attr-defined]
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield server
    httpd.shutdown()
    httpd.server_close()
    thread.join()


@pytest.fixture
def account_file(token_server: TokenServer, tmp_path: Path) -> Path:
    info = {
        "type": "service_account",
        "project_id": PROJECT,
        "private_key_id": "0123456789abcdef",
        "private_key": token_server.private_pem,  # type: ignore[attr-defined]
        "client_email": f"toolwire@{PROJECT}.iam.gserviceaccount.com",
        "client_id": "1234567890",
        "token_uri": token_server.url,
    }
    path = tmp_path / "service-account.json"
    path.write_text(json.dumps(info))
    return path


def _hello() -> ModelRequest:
    return ModelRequest(messages=[Message.user("What is the weather in Paris?")], tools=TOOLS)


# ---------------------------------------------------------------------------------------------
# Gemini on Vertex


async def test_gemini_token_is_refreshed_when_it_expires(
    token_server: TokenServer, account_file: Path
) -> None:
    """A token that expires within google-auth's refresh margin is refreshed before the next request."""
    token_server.expires_in = 60
    vertex = CannedServer(GEMINI_SSE)
    model = GeminiModel(
        "gemini-2.5-flash", vertex=True, credentials_file=account_file, http_client=vertex.client()
    )
    for _ in range(2):
        assert (await collect(model, _hello())).text == "hi"
    assert vertex.tokens() == ["Bearer ya29.token-1", "Bearer ya29.token-2"]
    check_gemini(json.loads(vertex.requests[0].content))
    grant = token_server.grants[0]
    assert grant["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer"
    assert grant["iss"] == f"toolwire@{PROJECT}.iam.gserviceaccount.com"
    assert grant["scope"] == "https://www.googleapis.com/auth/cloud-platform"
    # The project came from the credentials; the location defaults to global.
    assert str(vertex.requests[0].url) == (
        f"https://aiplatform.googleapis.com/v1beta1/projects/{PROJECT}/locations/global/publishers/google"
        "/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    )


async def test_gemini_valid_token_is_reused(token_server: TokenServer, account_file: Path) -> None:
    vertex = CannedServer(GEMINI_SSE)
    model = GeminiModel(
        "gemini-2.5-flash", vertex=True, credentials_file=account_file, http_client=vertex.client()
    )
    for _ in range(3):
        await collect(model, _hello())
    assert vertex.tokens() == ["Bearer ya29.token-1"] * 3
    assert len(token_server.grants) == 1


async def test_application_default_credentials(
    token_server: TokenServer, account_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No credentials given: google-auth's ADC finds the service account named by GOOGLE_APPLICATION_CREDENTIALS."""
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(account_file))
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "europe-west4")
    vertex = CannedServer(GEMINI_SSE)
    model = GeminiModel("gemini-2.5-flash", vertex=True, http_client=vertex.client())
    await collect(model, _hello())
    assert vertex.tokens() == ["Bearer ya29.token-1"]
    assert vertex.requests[0].url.host == "europe-west4-aiplatform.googleapis.com"
    # The model string builds the same.
    assert isinstance(infer_model("vertex:gemini-2.5-flash"), GeminiModel)


def test_no_credentials_anywhere_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="Application Default Credentials"):
        GeminiModel("gemini-2.5-flash", vertex=True, project=PROJECT)
    with pytest.raises(ConfigError, match="Application Default Credentials"):
        AnthropicVertexModel(CLAUDE, project=PROJECT)


async def test_a_refused_grant_is_a_typed_error(token_server: TokenServer, account_file: Path) -> None:
    token_server.fail = True
    vertex = CannedServer(GEMINI_SSE)
    model = GeminiModel(
        "gemini-2.5-flash", vertex=True, credentials_file=account_file, http_client=vertex.client()
    )
    with pytest.raises(ProviderHTTPError) as caught:
        await collect(model, _hello())
    assert (caught.value.status, caught.value.code, caught.value.retryable) == (401, "refresh_error", False)
    assert vertex.requests == []


# ---------------------------------------------------------------------------------------------
# Claude on Vertex


def _reference(location: str, *, stream: bool) -> Any:
    """The request anthropic's own Vertex client sends for the same call (it is built on httpx2)."""
    import httpx2
    from anthropic import AnthropicVertex

    sent: list[Any] = []

    def handler(request: Any) -> Any:
        sent.append(request)
        return httpx2.Response(500)

    client = AnthropicVertex(
        region=location,
        project_id=PROJECT,
        access_token="reference",
        max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
    )
    with pytest.raises(Exception):  # noqa: B017 - only the request matters
        client.messages.create(
            model=CLAUDE, max_tokens=4096, messages=[{"role": "user", "content": "hi"}], stream=stream
        )
    return sent[0]


@pytest.mark.parametrize(
    ("location", "host"),
    [
        ("us-east5", "us-east5-aiplatform.googleapis.com"),
        ("global", "aiplatform.googleapis.com"),
        ("eu", "aiplatform.eu.rep.googleapis.com"),
    ],
)
async def test_claude_stream_raw_predict(
    location: str, host: str, token_server: TokenServer, account_file: Path
) -> None:
    recorded = load(CLAUDE_STREAM).interactions[0].body
    vertex = CannedServer(recorded)
    credentials = service_account.Credentials.from_service_account_file(str(account_file))
    model = AnthropicVertexModel(
        CLAUDE, location=location, credentials=credentials, http_client=vertex.client(), betas=["beta-x"]
    )
    parts = [p async for p in model.stream(_hello())]

    direct = CannedServer(recorded)
    anthropic = AnthropicModel(CLAUDE, api_key="k", http_client=direct.client(), betas=["beta-x"])
    expected = [p async for p in anthropic.stream(_hello())]
    assert [p for p in parts if not isinstance(p, StreamStart | ResponseMetadata)] == [
        p for p in expected if not isinstance(p, StreamStart | ResponseMetadata)
    ]

    (sent,) = vertex.requests
    reference = _reference(location, stream=True)
    assert (sent.url.host, str(sent.url)) == (host, str(reference.url))
    assert sent.headers["authorization"] == "Bearer ya29.token-1"
    assert sent.headers["anthropic-beta"] == "beta-x"
    body = json.loads(sent.content)
    # Both name the version in the body, not the model. The value is the one Anthropic's Vertex docs require
    # (https://docs.anthropic.com/en/api/claude-on-vertex-ai); anthropic 2.14 sends its own API date there.
    reference_body = json.loads(reference.content)
    assert "model" not in body and "model" not in reference_body and "anthropic_version" in reference_body
    assert body == {
        **{k: v for k, v in json.loads(direct.requests[0].content).items() if k != "model"},
        "anthropic_version": "vertex-2023-10-16",
    }
    check_anthropic_on_platform(body, version="vertex-2023-10-16", model=CLAUDE)


async def test_claude_raw_predict_whole_message(token_server: TokenServer, account_file: Path) -> None:
    message = {
        "id": "msg_vrtx_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
        "content": [{"type": "tool_use", "id": "toolu_vrtx_01", "name": "get_weather", "input": {"city": "Paris"}}],
        "stop_reason": "tool_use", "stop_sequence": None, "usage": {"input_tokens": 12, "output_tokens": 9},
    }  # fmt: skip
    vertex = CannedServer(json.dumps(message).encode(), "application/json")
    model = AnthropicVertexModel(
        CLAUDE, project="other-project", location="us-east5", credentials_file=account_file,
        http_client=vertex.client(), stream=False,
    )  # fmt: skip
    response = await collect(model, _hello())
    assert [(c.tool_call_id, c.args) for c in response.tool_calls] == [("toolu_vrtx_01", {"city": "Paris"})]
    reference = _reference("us-east5", stream=False)
    assert str(vertex.requests[0].url) == str(reference.url).replace(PROJECT, "other-project")
    assert json.loads(vertex.requests[0].content)["stream"] is False


def test_claude_on_vertex_never_takes_an_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Claude on Vertex takes OAuth only: GOOGLE_API_KEY is not read, ADC is looked for instead."""
    monkeypatch.setenv("GOOGLE_API_KEY", "gk-env")
    with pytest.raises(ConfigError, match="Application Default Credentials"):
        infer_model(f"anthropic-vertex:{CLAUDE}")
    monkeypatch.setenv("GOOGLE_ACCESS_TOKEN", "ya29-fixed")
    with pytest.raises(ConfigError, match="project"):
        AnthropicVertexModel(CLAUDE)
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", PROJECT)
    model = AnthropicVertexModel(CLAUDE, location="us")
    assert model.base_url == (
        f"https://aiplatform.us.rep.googleapis.com/v1/projects/{PROJECT}/locations/us/publishers/anthropic"
    )
    with pytest.raises(ConfigError, match="location"):
        AnthropicVertexModel(CLAUDE, location="evil.example.com#")


async def test_an_unreachable_token_endpoint_is_a_retryable_connection_error(
    token_server: TokenServer, account_file: Path
) -> None:
    info = json.loads(account_file.read_text())
    with socket.socket() as closed:  # a loopback port nobody listens on
        closed.bind(("127.0.0.1", 0))
        info["token_uri"] = f"http://127.0.0.1:{closed.getsockname()[1]}/token"
    credentials = service_account.Credentials.from_service_account_info(info)
    vertex = CannedServer(GEMINI_SSE)
    model = GeminiModel(
        "gemini-2.5-flash", vertex=True, project=PROJECT, credentials=credentials, http_client=vertex.client()
    )
    with pytest.raises(ProviderConnectionError) as caught:
        await collect(model, _hello())
    assert caught.value.retryable and vertex.requests == []
