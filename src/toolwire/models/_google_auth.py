"""Google OAuth for Vertex AI: google-auth credentials whose access token is refreshed when it expires.

Application Default Credentials (``GOOGLE_APPLICATION_CREDENTIALS``, ``gcloud auth application-default
login``, the metadata server of a Google Cloud VM), a service-account key file or a google-auth
``Credentials`` object: google-auth's own refresh runs (a
JWT grant to the token endpoint for a service account) whenever the token is missing or about to expire,
in a worker thread since it is blocking HTTP. ``pip install 'toolwire[vertex]'``.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from toolwire.errors import (
    ConfigError,
    MissingExtraError,
    MissingKeyError,
    ProviderConnectionError,
    ProviderHTTPError,
)
from toolwire.models._providers import from_environment, vertex_endpoint

CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"


class GoogleAuth:
    """Credentials and the project they name; :meth:`token` is a valid access token, refreshed as needed."""

    def __init__(self, credentials: Any, project: str | None = None) -> None:
        scoped = getattr(credentials, "requires_scopes", False)
        self.credentials = credentials.with_scopes([CLOUD_PLATFORM_SCOPE]) if scoped else credentials
        self.project = project or getattr(credentials, "project_id", None)
        self._lock = asyncio.Lock()

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> GoogleAuth:
        """A service-account key file (other credential types: Application Default Credentials)."""
        _google_auth()
        from google.oauth2 import service_account

        try:
            credentials = service_account.Credentials.from_service_account_file(  # type: ignore[no-untyped-call]
                os.fspath(path), scopes=[CLOUD_PLATFORM_SCOPE]
            )
        except (OSError, ValueError, KeyError) as exc:
            raise ConfigError(f"cannot read a service account from {os.fspath(path)!r}: {exc}") from exc
        return cls(credentials, credentials.project_id)

    @classmethod
    def default(cls) -> GoogleAuth:
        """Application Default Credentials, or a :class:`ConfigError` saying how to set them up."""
        auth = _google_auth()
        try:
            credentials, project = auth.default(scopes=[CLOUD_PLATFORM_SCOPE])
        except auth.exceptions.DefaultCredentialsError as exc:
            raise MissingKeyError(
                "Vertex AI needs credentials (Application Default Credentials: `gcloud auth "
                "application-default login`, a Google Cloud VM)",
                variables=("GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_ACCESS_TOKEN", "GOOGLE_API_KEY"),
                in_code="pass credentials=, credentials_file=, access_token= or an express-mode api_key=",
            ) from exc
        return cls(credentials, project)

    async def token(self, *, provider: str, model: str) -> str:
        """A valid access token; refreshing failures are typed provider errors."""
        async with self._lock:  # one refresh for concurrent requests
            if not self.credentials.valid:
                await asyncio.to_thread(self._refresh, provider, model)
        return str(self.credentials.token)

    def _refresh(self, provider: str, model: str) -> None:
        from google.auth import exceptions
        from google.auth.transport.requests import Request

        try:
            self.credentials.refresh(Request())
        except exceptions.TransportError as exc:
            raise ProviderConnectionError(
                f"cannot reach Google's token endpoint: {exc}", provider=provider, model=model, retryable=True
            ) from exc
        except exceptions.RefreshError as exc:
            raise ProviderHTTPError(
                f"Google credentials could not be refreshed: {exc}",
                provider=provider,
                model=model,
                status=401,
                code="refresh_error",
                retryable=bool(getattr(exc, "retryable", False)),
            ) from exc


class VertexCredentials:
    """Where a Vertex AI model sends requests and how it authenticates, resolved when the model is built.

    In order: ``credentials`` (a google-auth object) or ``credentials_file``; else ``access_token`` (or
    ``GOOGLE_ACCESS_TOKEN``, a fixed token) or an express-mode ``api_key`` (or ``GOOGLE_API_KEY``); else, for
    Google's own host (no ``base_url``), Application Default Credentials. ``express=False``: the publisher
    takes no API keys (Claude), so none is read. Credentials from the environment
    are only ever sent to Google's hosts (see ``toolwire.models._providers.vertex_endpoint``).
    """

    def __init__(
        self,
        *,
        base_url: str | None,
        api_key: str | None,
        access_token: str | None,
        project: str | None,
        location: str | None,
        credentials: Any = None,
        credentials_file: str | os.PathLike[str] | None = None,
        publisher: str = "google",
        version: str = "v1beta1",
        express: bool = True,
    ) -> None:
        self.auth: GoogleAuth | None = None
        if credentials is not None:
            self.auth = GoogleAuth(credentials)
        elif credentials_file is not None:
            self.auth = GoogleAuth.from_file(credentials_file)
        elif base_url is None and not (
            access_token
            or from_environment(("GOOGLE_ACCESS_TOKEN",))
            or (express and (api_key or from_environment(("GOOGLE_API_KEY",))))
        ):
            self.auth = GoogleAuth.default()
        if not project and self.auth is not None:
            project = self.auth.project
        self.base_url, self.api_key, self.access_token = vertex_endpoint(
            base_url,
            api_key,
            access_token,
            project,
            location,
            publisher=publisher,
            version=version,
            authenticated=self.auth is not None,
            express=express,
        )

    async def headers(self, *, provider: str, model: str) -> dict[str, str]:
        """The authentication headers of the next request (a refreshed token when it expired)."""
        if self.auth is not None:
            return {"authorization": f"Bearer {await self.auth.token(provider=provider, model=model)}"}
        return google_headers(self.access_token, self.api_key)


def google_headers(access_token: str | None, api_key: str | None) -> dict[str, str]:
    """A fixed bearer token, else an API key, else nothing (a loopback server checked at construction)."""
    if access_token:
        return {"authorization": f"Bearer {access_token}"}
    if api_key:
        return {"x-goog-api-key": api_key}
    return {}


def _google_auth() -> Any:
    try:
        import google.auth
        import google.auth.transport.requests  # needs `requests`: fail now, not on first use
    except ImportError as exc:
        raise MissingExtraError("vertex", "Vertex AI credentials", missing=exc.name) from exc
    return google.auth


__all__ = ["CLOUD_PLATFORM_SCOPE", "GoogleAuth", "VertexCredentials", "google_headers"]
