"""A real MCP server behind OAuth 2.1 for the tests, built on the SDK's authorization server
(``mcp.server.auth``): ``python _mcp_oauth_server.py http PORT [TOKEN_SECONDS]``.

The test authorization provider approves every authorization request at once (the redirect carries the code,
as after a person signed in) and keeps everything in memory. Access tokens live ``TOKEN_SECONDS`` (default
3600) and refresh tokens rotate. Tool ``whoami`` tells which client and which access token (by serial) a
call came with; ``auth_stats`` counts registrations, authorizations and refreshes.
"""

from __future__ import annotations

import itertools
import secrets
import sys
import time
from typing import Any

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

PORT = int(sys.argv[2])
TOKEN_SECONDS = int(sys.argv[3]) if len(sys.argv) > 3 else 3600
URL = f"http://127.0.0.1:{PORT}"
stats = {"registrations": 0, "authorizations": 0, "refreshes": 0}
serials = itertools.count(1)


class ApprovingProvider:
    """An authorization server whose resource owner says yes to everything."""

    def __init__(self) -> None:
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.serial: dict[str, int] = {}
        self.refresh: dict[str, RefreshToken] = {}

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        stats["registrations"] += 1
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        stats["authorizations"] += 1
        code = secrets.token_urlsafe(24)
        assert client.client_id is not None
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [],
            expires_at=time.time() + 300,
            client_id=client.client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        return self.codes.get(authorization_code)

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        del self.codes[authorization_code.code]
        return self._issue(
            authorization_code.client_id, authorization_code.scopes, authorization_code.resource
        )

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> RefreshToken | None:
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        stats["refreshes"] += 1
        del self.refresh[refresh_token.token]  # rotated: a refresh token is good once
        return self._issue(refresh_token.client_id, scopes or refresh_token.scopes, refresh_token.resource)

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        if found is None or (found.expires_at is not None and found.expires_at < time.time()):
            return None
        return found

    async def revoke_token(self, token: Any) -> None:
        self.access.pop(getattr(token, "token", ""), None)

    def _issue(self, client_id: str, scopes: list[str], resource: str | None) -> OAuthToken:
        access, refresh = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        self.access[access] = AccessToken(
            token=access,
            client_id=client_id,
            scopes=scopes,
            expires_at=int(time.time()) + TOKEN_SECONDS,
            resource=resource,
        )
        self.serial[access] = next(serials)
        self.refresh[refresh] = RefreshToken(
            token=refresh, client_id=client_id, scopes=scopes, resource=resource
        )
        return OAuthToken(
            access_token=access,
            expires_in=TOKEN_SECONDS,
            refresh_token=refresh,
            scope=" ".join(scopes) or None,
        )


provider = ApprovingProvider()
server = MCPServer(
    "toolwire-oauth-test",
    auth_server_provider=provider,
    auth=AuthSettings(
        issuer_url=URL,
        resource_server_url=f"{URL}/mcp",
        client_registration_options=ClientRegistrationOptions(enabled=True, valid_scopes=["tools"]),
        required_scopes=[],
    ),
)


@server.tool()
def whoami() -> dict[str, Any]:
    """The client and the access token (by serial) this call came with."""
    token = get_access_token()
    assert token is not None
    return {"client_id": token.client_id, "token": provider.serial[token.token]}


@server.tool()
def auth_stats() -> dict[str, int]:
    """How many registrations, authorizations and refreshes this server made."""
    return dict(stats)


if __name__ == "__main__":
    server.run("streamable-http", host="127.0.0.1", port=PORT)
