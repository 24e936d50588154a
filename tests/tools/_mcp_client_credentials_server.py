"""A real MCP server behind an OAuth 2.1 authorization server that grants ``client_credentials``, for the
tests: ``python _mcp_client_credentials_server.py http PORT``.

The grant, client authentication, token generation, revocation (RFC 7009) and bearer token validation are
authlib's (``AuthorizationServer``, ``ClientCredentialsGrant``, ``RevocationEndpoint``,
``BearerTokenValidator``); this module only stores clients and tokens in memory and carries requests between
Starlette and authlib. The MCP server is the SDK's streamable HTTP server, a resource server that advertises
this authorization server (RFC 9728) and checks bearer tokens with authlib's validator.

Clients: ``worker`` / ``worker-secret`` (tokens live an hour) and ``brief`` / ``brief-secret`` (tokens live
one second); both may ask for ``tools`` and ``reports``. ``GET /stats`` tells what the authorization server
saw (token requests with the scope each asked for, issued and revoked tokens) and how often each tool ran.
"""

from __future__ import annotations

import secrets
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from authlib.oauth2.rfc6749 import (
    AuthorizationServer,
    ClientMixin,
    OAuth2Error,
    OAuth2Request,
    TokenMixin,
)
from authlib.oauth2.rfc6749.grants import ClientCredentialsGrant
from authlib.oauth2.rfc6749.requests import BasicOAuth2Payload
from authlib.oauth2.rfc6750 import BearerTokenGenerator, BearerTokenValidator
from authlib.oauth2.rfc7009 import RevocationEndpoint
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

PORT = int(sys.argv[2])
URL = f"http://127.0.0.1:{PORT}"
RESOURCE = f"{URL}/mcp"
SCOPES = ["tools", "reports"]
stats: dict[str, Any] = {"token_requests": [], "issued": 0, "revoked": 0, "calls": {}}


@dataclass
class Client(ClientMixin):
    client_id: str
    secret: str
    token_seconds: int
    scopes: list[str] = field(default_factory=lambda: list(SCOPES))

    def get_client_id(self) -> str:
        return self.client_id

    def get_default_redirect_uri(self) -> None:
        return None

    def get_allowed_scope(self, scope: str | None) -> str:
        return " ".join(s for s in (scope or "").split() if s in self.scopes)

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        return False

    def check_client_secret(self, client_secret: str) -> bool:
        return secrets.compare_digest(client_secret, self.secret)

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        return method in ("client_secret_basic", "client_secret_post")

    def check_response_type(self, response_type: str) -> bool:
        return False

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type == "client_credentials"


@dataclass
class Token(TokenMixin):
    access_token: str
    client: Client
    scope: str
    expires_at: float
    resource: str | None
    serial: int
    revoked: bool = False

    def check_client(self, client: Client) -> bool:
        return client.client_id == self.client.client_id

    def get_scope(self) -> str:
        return self.scope

    def get_expires_in(self) -> int:
        return max(0, int(self.expires_at - time.time()))

    def is_expired(self) -> bool:
        return time.time() >= self.expires_at

    def is_revoked(self) -> bool:
        return self.revoked


CLIENTS = {
    c.client_id: c for c in (Client("worker", "worker-secret", 3600), Client("brief", "brief-secret", 1))
}
TOKENS: dict[str, Token] = {}


class FormRequest(OAuth2Request):
    """authlib's request over a form already read by Starlette (authlib is synchronous)."""

    def __init__(self, request: Request, form: dict[str, str]) -> None:
        super().__init__(request.method, str(request.url), headers=request.headers)
        self.payload = BasicOAuth2Payload(form)
        self._form = form

    @property
    def form(self) -> dict[str, str]:
        return self._form


class StarletteAuthorizationServer(AuthorizationServer):
    def query_client(self, client_id: str) -> Client | None:
        return CLIENTS.get(client_id)

    def save_token(self, token: dict[str, Any], request: FormRequest) -> None:
        stats["issued"] += 1
        TOKENS[token["access_token"]] = Token(
            access_token=token["access_token"],
            client=request.client,
            scope=token.get("scope", ""),
            expires_at=time.time() + token["expires_in"],
            resource=request.form.get("resource"),
            serial=stats["issued"],
        )

    def create_oauth2_request(self, request: FormRequest) -> FormRequest:
        return request

    def handle_response(self, status: int, body: Any, headers: list[tuple[str, str]]) -> Response:
        return JSONResponse(body, status, headers=dict(headers))

    def send_signal(self, name: str, *args: Any, **kwargs: Any) -> None:
        pass


class Revocation(RevocationEndpoint):
    def query_token(self, token_string: str, token_type_hint: str | None) -> Token | None:
        return TOKENS.get(token_string)

    def revoke_token(self, token: Token, request: FormRequest) -> None:
        stats["revoked"] += 1
        token.revoked = True


authorization = StarletteAuthorizationServer(scopes_supported=SCOPES)
authorization.register_grant(ClientCredentialsGrant)
authorization.register_endpoint(Revocation)
authorization.register_token_generator(
    "default",
    BearerTokenGenerator(
        access_token_generator=lambda **_: secrets.token_urlsafe(24),
        expires_generator=lambda client, grant_type: client.token_seconds,
    ),
)


class Validator(BearerTokenValidator):
    def authenticate_token(self, token_string: str) -> Token | None:
        return TOKENS.get(token_string)


class Verifier:
    """The MCP server's ``TokenVerifier``: authlib's bearer validation, and the audience (RFC 8707)."""

    async def verify_token(self, token: str) -> AccessToken | None:
        found = Validator().authenticate_token(token)
        try:
            Validator().validate_token(found, [], None)
        except Exception:  # authlib's InvalidTokenError: unknown, expired or revoked
            return None
        if found.resource != RESOURCE:
            return None
        return AccessToken(
            token=token,
            client_id=found.client.client_id,
            scopes=found.scope.split(),
            expires_at=int(found.expires_at),
            resource=found.resource,
        )


server = MCPServer(
    "toolwire-client-credentials-test",
    token_verifier=Verifier(),
    auth=AuthSettings(
        issuer_url=URL,
        resource_server_url=RESOURCE,
        required_scopes=None,  # so the advertised scopes are the authorization server's (all it knows)
        validate_token_resource=False,  # the verifier checks the audience
    ),
)


async def form_request(request: Request) -> FormRequest:
    form = await request.form()
    return FormRequest(request, {k: v for k, v in form.items() if isinstance(v, str)})


@server.custom_route("/.well-known/oauth-authorization-server", methods=["GET"])
async def metadata(request: Request) -> Response:
    return JSONResponse(
        {
            "issuer": URL,
            # RFC 8414 lets a server without such grants omit it, but the SDK's client (mcp 2.3) ignores
            # metadata that does, as most servers serve one
            "authorization_endpoint": f"{URL}/authorize",
            "token_endpoint": f"{URL}/token",
            "revocation_endpoint": f"{URL}/revoke",
            "grant_types_supported": ["client_credentials"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
            "scopes_supported": SCOPES,
            "response_types_supported": [],
        }
    )


@server.custom_route("/authorize", methods=["GET"])
async def authorize(request: Request) -> Response:
    # no grant of this server uses the authorization endpoint: authlib answers unsupported_response_type
    oauth_request = FormRequest(request, dict(request.query_params))
    try:
        authorization.get_authorization_grant(oauth_request)
    except OAuth2Error as error:
        response: Response = authorization.handle_error_response(oauth_request, error)
        return response
    raise AssertionError("no authorization grant is registered")


@server.custom_route("/token", methods=["POST"])
async def token(request: Request) -> Response:
    oauth_request = await form_request(request)
    stats["token_requests"].append(
        {"grant_type": oauth_request.form.get("grant_type"), "scope": oauth_request.form.get("scope")}
    )
    response: Response = authorization.create_token_response(oauth_request)
    return response


@server.custom_route("/revoke", methods=["POST"])
async def revoke(request: Request) -> Response:
    response: Response = authorization.create_endpoint_response("revocation", await form_request(request))
    return response


@server.custom_route("/stats", methods=["GET"])
async def get_stats(request: Request) -> Response:
    return JSONResponse(stats)


@server.tool()
def whoami() -> dict[str, Any]:
    """The client, the scopes and the access token (by serial) this call came with."""
    stats["calls"]["whoami"] = stats["calls"].get("whoami", 0) + 1
    access = get_access_token()
    assert access is not None
    return {"client_id": access.client_id, "scopes": access.scopes, "token": TOKENS[access.token].serial}


if __name__ == "__main__":
    server.run("streamable-http", host="127.0.0.1", port=PORT)
