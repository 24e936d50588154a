"""Where a credential may be sent. One rule for every adapter:

* a key given explicitly (``api_key=``) goes to the configured base URL, whatever it is;
* a key read from a provider's environment variable (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, ...) goes
  only to that provider's own host, over https: a base URL pointing anywhere else (a spec's URL, a
  ``*_BASE_URL`` variable, a proxy) never receives it, so a key cannot leak to a server it was not issued for;
* a server on the loopback interface (``localhost``, ``127.0.0.0/8``, ``::1``) may run without a key;
* otherwise a missing key is a :class:`~toolwire.errors.ConfigError` when the model is built, before any
  request is made or anything is stored.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Callable, Sequence
from urllib.parse import urlsplit

from toolwire.errors import ConfigError


def url_host(url: str) -> str:
    """The lower-case host name of ``url`` (no port, no brackets), or ``""``."""
    try:
        return (urlsplit(url).hostname or "").lower()
    except ValueError:  # e.g. an invalid IPv6 literal
        return ""


def is_http_url(url: str) -> bool:
    try:
        return urlsplit(url).scheme in ("http", "https") and bool(url_host(url))
    except ValueError:
        return False


def is_own_host(url: str, owns: Callable[[str], bool]) -> bool:
    """Whether ``url`` is https to a host ``owns`` accepts: only then may an environment key go there."""
    try:
        scheme = urlsplit(url).scheme
    except ValueError:
        return False
    host = url_host(url)
    return scheme == "https" and bool(host) and owns(host)


def is_loopback(url: str) -> bool:
    host = url_host(url)
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def from_environment(names: Sequence[str]) -> str | None:
    """The first of ``names`` set to a non-empty value."""
    return next((value for name in names if (value := os.environ.get(name))), None)


def pick_key(
    api_key: str | None,
    base_url: str,
    *,
    own_host: bool,
    variables: Sequence[str],
    provider: str,
    elsewhere: str = "pass api_key=",
) -> str | None:
    """The key to send to ``base_url``; ``None`` for a server that takes none.

    ``api_key`` given explicitly wins (``""`` says the server takes no key, which the provider's own host
    never accepts). ``variables`` are read only when ``own_host``. ``elsewhere`` tells how to give a key
    for another host.
    """
    if api_key:
        return api_key
    if own_host:
        key = from_environment(variables) if api_key is None else None
        if key:
            return key
        raise ConfigError(f"no {provider} API key: pass api_key= or set {' / '.join(variables)}")
    if api_key is not None or is_loopback(base_url):
        return None
    raise ConfigError(
        f"no API key for {url_host(base_url) or base_url!r}: {' / '.join(variables)} is only sent to "
        f"{provider}'s own host; {elsewhere} (api_key='' for a server that takes none)"
    )


__all__ = ["from_environment", "is_http_url", "is_loopback", "is_own_host", "pick_key", "url_host"]
