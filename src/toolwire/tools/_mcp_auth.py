"""OAuth 2.1 for ``MCPServerHTTP``: the authorization code flow with PKCE, or client credentials, with
dynamic client registration and token refresh done by the mcp SDK's client (``mcp.client.auth``), and the
tokens kept per server and user in a :class:`TokenStore` of ours.

``OAuthAuthorizationCode(authorize=...)`` takes one callback: given the authorization URL, bring a person
there and return the URL the browser was redirected to (``redirect_uri?code=...&state=...``); the SDK checks
the state and exchanges the code. ``OAuthClientCredentials(client_id, client_secret)`` needs nobody.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, TypeAlias
from urllib.parse import parse_qs, urlsplit

from toolwire.errors import ConfigError

TokenKind: TypeAlias = Literal["tokens", "client"]
"""What is stored: the OAuth tokens, or the client registration (client id and secret)."""


class TokenStore(Protocol):
    """Where OAuth tokens and client registrations are kept, by server URL and user (JSON objects)."""

    async def get(self, server: str, user: str, kind: TokenKind) -> dict[str, Any] | None: ...

    async def set(self, server: str, user: str, kind: TokenKind, value: dict[str, Any]) -> None: ...


class MemoryTokenStore:
    """Tokens in this process's memory (the default): a restart authorizes again."""

    def __init__(self) -> None:
        self._values: dict[tuple[str, str, str], dict[str, Any]] = {}

    async def get(self, server: str, user: str, kind: TokenKind) -> dict[str, Any] | None:
        value = self._values.get((server, user, kind))
        return dict(value) if value is not None else None

    async def set(self, server: str, user: str, kind: TokenKind, value: dict[str, Any]) -> None:
        self._values[(server, user, kind)] = dict(value)


class FileTokenStore:
    """Tokens in one JSON file, readable by its owner only, replaced atomically on each write."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path).expanduser()
        self._lock = asyncio.Lock()

    async def get(self, server: str, user: str, kind: TokenKind) -> dict[str, Any] | None:
        async with self._lock:
            value = (await asyncio.to_thread(self._read)).get(_key(server, user, kind))
        return dict(value) if isinstance(value, dict) else None

    async def set(self, server: str, user: str, kind: TokenKind, value: dict[str, Any]) -> None:
        async with self._lock:
            await asyncio.to_thread(self._write, _key(server, user, kind), value)

    def _read(self) -> dict[str, Any]:
        try:
            loaded = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read the MCP token file {self.path}: {exc}") from exc
        return loaded if isinstance(loaded, dict) else {}

    def _write(self, key: str, value: dict[str, Any]) -> None:
        values = self._read()
        values[key] = value
        self.path.parent.mkdir(parents=True, exist_ok=True)
        descriptor, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.")
        try:
            with os.fdopen(descriptor, "w") as file:  # mkstemp made it 0600: tokens are secrets
                json.dump(values, file)
            os.replace(temporary, self.path)
        except BaseException:
            os.unlink(temporary)
            raise


def _key(server: str, user: str, kind: str) -> str:
    return json.dumps([server, user, kind])


@dataclass(frozen=True, slots=True, kw_only=True)
class OAuthAuthorizationCode:
    """The authorization code flow with PKCE, for a person who signs in (dynamic client registration when
    the store has no client for the server yet)."""

    authorize: Callable[[str], Awaitable[str]]
    """Given the authorization URL, have a person sign in there and return the URL the browser was sent
    back to (``redirect_uri`` with ``code`` and ``state``)."""
    redirect_uri: str = "http://127.0.0.1:33418/callback"
    client_name: str = "toolwire"
    scope: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class OAuthClientCredentials:
    """The client credentials grant, for a client acting as itself (no person, no registration)."""

    client_id: str
    client_secret: str
    scope: str | None = None
    """The scope asked for, exactly (space-separated); ``None`` lets the SDK choose from what the servers
    advertise (the MCP server's challenge or metadata, else all the authorization server knows)."""
    issuer: str | None = None
    """The authorization server these credentials belong to; the flow stops if the server leads elsewhere."""


OAuth: TypeAlias = OAuthAuthorizationCode | OAuthClientCredentials


class _StorageForSDK:
    """The SDK's ``TokenStorage`` over a :class:`TokenStore`, for one server and user."""

    def __init__(self, store: TokenStore, server: str, user: str) -> None:
        self.store, self.server, self.user = store, server, user

    async def get_tokens(self) -> Any:
        from mcp.shared.auth import OAuthToken

        value = await self.store.get(self.server, self.user, "tokens")
        if value is None:
            return None
        value.pop("expires_at", None)
        return OAuthToken.model_validate(value)

    async def set_tokens(self, tokens: Any) -> None:
        value = tokens.model_dump(mode="json", exclude_none=True)
        if tokens.expires_in is not None:  # the SDK keeps the expiry in memory only: store when it falls
            value["expires_at"] = time.time() + tokens.expires_in
        await self.store.set(self.server, self.user, "tokens", value)

    async def expires_at(self) -> float | None:
        value = await self.store.get(self.server, self.user, "tokens")
        expires_at = value.get("expires_at") if value is not None else None
        return float(expires_at) if isinstance(expires_at, int | float) else None

    async def get_client_info(self) -> Any:
        from mcp.shared.auth import OAuthClientInformationFull

        value = await self.store.get(self.server, self.user, "client")
        return OAuthClientInformationFull.model_validate(value) if value is not None else None

    async def set_client_info(self, client_info: Any) -> None:
        value = client_info.model_dump(mode="json", exclude_none=True)
        await self.store.set(self.server, self.user, "client", value)


def auth_for(oauth: OAuth, url: str, store: TokenStore, user: str) -> Any:
    """The SDK's ``httpx`` auth object doing ``oauth`` for the server at ``url``."""
    storage = _StorageForSDK(store, url, user)
    if isinstance(oauth, OAuthClientCredentials):
        from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider

        return _asking_for(oauth.scope, _restoring_expiry(ClientCredentialsOAuthProvider, storage))(
            server_url=url,
            storage=storage,
            client_id=oauth.client_id,
            client_secret=oauth.client_secret,
            scope=oauth.scope,
            issuer=oauth.issuer,
        )
    from mcp.client.auth import OAuthClientProvider
    from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata

    redirected: asyncio.Queue[str] = asyncio.Queue(maxsize=1)

    async def redirect_handler(authorization_url: str) -> None:
        redirected.put_nowait(await oauth.authorize(authorization_url))

    async def callback_handler() -> Any:
        query = parse_qs(urlsplit(redirected.get_nowait()).query)
        if "error" in query:
            raise ConfigError(f"the authorization server refused: {' '.join(query['error'])}")
        first = {name: values[0] for name, values in query.items()}
        return AuthorizationCodeResult(
            code=first.get("code", ""), state=first.get("state"), iss=first.get("iss")
        )

    metadata = _scope_kept(OAuthClientMetadata, oauth.scope)(
        client_name=oauth.client_name,
        redirect_uris=[oauth.redirect_uri],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        scope=oauth.scope,
    )
    return _restoring_expiry(OAuthClientProvider, storage)(
        server_url=url,
        client_metadata=metadata,
        storage=storage,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
    )


def _restoring_expiry(provider: type[Any], storage: _StorageForSDK) -> type[Any]:
    """The SDK's provider, also reading when stored tokens expire: it loads stored tokens as if they never
    did, so a token stored yesterday would be sent, refused, and cost a new sign-in where a refresh
    (``refresh_token``) was enough."""

    class RestoringExpiry(provider):  # type: ignore[misc]
        async def _initialize(self) -> None:
            await super()._initialize()
            self.context.token_expiry_time = await storage.expires_at()

    return RestoringExpiry


def _scope_kept(metadata: type[Any], scope: str | None) -> type[Any]:
    """The SDK's client metadata, keeping the configured scope: before registering and authorizing, the SDK
    replaces it with what the servers advertise (the challenge, the resource metadata, or nothing), so a
    client configured for ``tools`` registered and asked for no scope at all. ``None``: the SDK chooses."""
    if scope is None:
        return metadata

    class ScopeKept(metadata):  # type: ignore[misc]
        def __setattr__(self, name: str, value: Any) -> None:
            if name != "scope":  # the configured scope is what is registered and asked for
                super().__setattr__(name, value)

    return ScopeKept


def _asking_for(scope: str | None, provider: type[Any]) -> type[Any]:
    """The SDK's client credentials provider, asking for the configured scope: before each grant it replaces
    the configured scope with what the servers advertise (the challenge, the resource metadata, or every
    scope the authorization server knows), so a client configured for ``tools`` asked for ``tools admin``."""
    if scope is None:
        return provider

    class AskingFor(provider):  # type: ignore[misc]
        async def _perform_authorization(self) -> Any:
            self.context.client_metadata.scope = scope
            return await super()._perform_authorization()

    return AskingFor
