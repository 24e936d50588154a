"""Bearer tokens mapped to user ids; without tokens, a loopback-only development mode.

Tokens come from a file (one ``TOKEN USER_ID`` pair per line, ``#`` comments) or the environment
variable ``TOOLWIRE_TOKENS`` (``token1:alice,token2:bob``). Only SHA-256 digests are kept in memory,
and no token is ever logged. ``EventSource`` cannot send headers, so ``?token=`` is accepted too;
the server's own access log never prints query strings.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
from collections.abc import Mapping
from pathlib import Path

from toolwire.errors import ConfigError
from toolwire.server.errors import RequestError

DEV_USER = "local"
TOKENS_ENV = "TOOLWIRE_TOKENS"


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class Auth:
    """Resolves a request's credentials to a user id, or refuses it with a typed error."""

    def __init__(self, tokens: Mapping[str, str] | None = None) -> None:
        self._users = {_digest(token): user for token, user in (tokens or {}).items()}

    @property
    def development(self) -> bool:
        """No token configured: only loopback clients, all as one local user."""
        return not self._users

    @classmethod
    def from_sources(
        cls, tokens_file: str | os.PathLike[str] | None = None, *, extra: Mapping[str, str] | None = None
    ) -> Auth:
        """Tokens from ``extra`` (token -> user), the file and ``TOOLWIRE_TOKENS``."""
        tokens: dict[str, str] = dict(extra or {})
        if tokens_file is not None:
            tokens.update(_read_token_file(Path(tokens_file)))
        env = os.environ.get(TOKENS_ENV, "")
        for pair in filter(None, (p.strip() for p in env.split(","))):
            token, sep, user = pair.partition(":")
            if not sep or not token or not user:
                raise ConfigError(f"{TOKENS_ENV} must look like 'token1:alice,token2:bob'")
            tokens[token] = user
        return cls(tokens)

    def user_for(self, authorization: str | None, query_token: str | None, client_host: str | None) -> str:
        if self.development:
            if not _is_loopback(client_host):
                raise RequestError(
                    "no tokens are configured: this server only accepts loopback clients",
                    status=403,
                    kind="forbidden",
                )
            return DEV_USER
        token = query_token
        if authorization:
            scheme, _, value = authorization.partition(" ")
            if scheme.lower() != "bearer" or not value.strip():
                raise RequestError("Authorization must be 'Bearer <token>'", status=401, kind="unauthorized")
            token = value.strip()
        if not token:
            raise RequestError("a bearer token is required", status=401, kind="unauthorized")
        user = self._users.get(_digest(token))
        if user is None:
            raise RequestError("unknown token", status=401, kind="unauthorized")
        return user


def _read_token_file(path: Path) -> dict[str, str]:
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise ConfigError(f"cannot read the tokens file {path}: {exc.strerror}") from exc
    tokens: dict[str, str] = {}
    for number, line in enumerate(lines, 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split()
        if len(fields) != 2:
            raise ConfigError(f"{path}:{number}: expected 'TOKEN USER_ID'")
        tokens[fields[0]] = fields[1]
    return tokens


def _is_loopback(host: str | None) -> bool:
    if host is None:
        return False
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"
