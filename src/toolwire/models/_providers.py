"""Where each provider's requests go and which credential may be sent there. One rule for every adapter:

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
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from toolwire.errors import ConfigError, MissingKeyError
from toolwire.models._catalog import SELF_HOSTED_KEY_VARIABLE, Preset


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
    elsewhere_variables: Sequence[str] = (),
) -> str | None:
    """The key to send to ``base_url``; ``None`` for a server that takes none.

    ``api_key`` given explicitly wins (``""`` says the server takes no key, which the provider's own host
    never accepts). ``variables`` are read only when ``own_host``; ``elsewhere_variables`` are where a key
    for another host comes from (read by the caller).
    """
    if api_key:
        return api_key
    if own_host:
        key = from_environment(variables) if api_key is None else None
        if key:
            return key
        raise MissingKeyError(f"no {provider} API key", variables=variables)
    if api_key is not None or is_loopback(base_url):
        return None
    raise MissingKeyError(
        f"no API key for {url_host(base_url) or base_url!r} ({' / '.join(variables)} is only sent to "
        f"{provider}'s own host)",
        variables=elsewhere_variables,
        in_code="pass api_key= (api_key='' for a server that takes none)",
    )


@dataclass(frozen=True, slots=True)
class Host:
    """A provider whose requests carry an API key: its own host, its default URL and its variables."""

    name: str
    """As written in error messages."""
    default_base_url: str
    key_variables: tuple[str, ...]
    """Read only for the provider's own host (:meth:`owns`)."""
    owns_host: Callable[[str], bool]
    base_url_variable: str | None = None
    """Read when no base URL is given, as the provider's SDKs do."""
    compatible_key_variable: str | None = None
    """The key for any other server speaking this provider's wire; never sent to the provider itself."""

    def owns(self, url: str) -> bool:
        return is_own_host(url, self.owns_host)

    def endpoint(self, api_key: str | None, base_url: str | None) -> tuple[str, str | None]:
        """``(base_url, key)``: the explicit URL, else the URL variable, else the default; the key for it."""
        url = (base_url or self._base_url_from_environment() or self.default_base_url).rstrip("/")
        if self.owns(url):
            return url, pick_key(
                api_key, url, own_host=True, variables=self.key_variables, provider=self.name
            )
        elsewhere: tuple[str, ...] = ()
        if self.compatible_key_variable is not None:
            elsewhere = (self.compatible_key_variable,)
            if api_key is None:
                api_key = from_environment((self.compatible_key_variable,))
        key = pick_key(
            api_key,
            url,
            own_host=False,
            variables=self.key_variables,
            provider=self.name,
            elsewhere_variables=elsewhere,
        )
        return url, key

    def _base_url_from_environment(self) -> str | None:
        return os.environ.get(self.base_url_variable) if self.base_url_variable else None


OPENAI = Host(
    name="OpenAI",
    default_base_url="https://api.openai.com/v1",
    key_variables=("OPENAI_API_KEY",),
    owns_host=lambda host: host == "api.openai.com" or host.endswith(".api.openai.com"),
    base_url_variable="OPENAI_BASE_URL",
    compatible_key_variable="OPENAI_COMPATIBLE_API_KEY",
)
"""``OPENAI_API_KEY`` goes to OpenAI's own hosts only (``api.openai.com`` and its regional
``*.api.openai.com``); any other server takes ``api_key=`` or ``OPENAI_COMPATIBLE_API_KEY``."""

ANTHROPIC = Host(
    name="Anthropic",
    default_base_url="https://api.anthropic.com",  # as in Anthropic's SDKs: without /v1
    key_variables=("ANTHROPIC_API_KEY",),
    owns_host=lambda host: host == "api.anthropic.com",
    base_url_variable="ANTHROPIC_BASE_URL",
)

GEMINI_API = Host(
    name="Gemini API",
    default_base_url="https://generativelanguage.googleapis.com/v1beta",
    key_variables=("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    owns_host=lambda host: host == "generativelanguage.googleapis.com",
)


# ---------------------------------------------------------------------------------------------
# Presets (``toolwire.models._catalog``): each hosted preset's variable for its own host only


def preset_host(preset: Preset) -> Host:
    """A hosted preset's :class:`Host`: its key variable goes to the host of its URL, over https, only."""
    if preset.base_url is None or preset.key_variable is None:
        raise ValueError(f"{preset.name} is self-hosted: it has no host of its own")
    own = url_host(preset.base_url)
    return Host(
        name=preset.title,
        default_base_url=preset.base_url,
        key_variables=(preset.key_variable,),
        owns_host=lambda host: host == own,
    )


def preset_endpoint(preset: Preset, api_key: str | None, base_url: str | None) -> tuple[str, str | None]:
    """``(base_url, key)`` for ``preset``: see :class:`~toolwire.models._catalog.Preset`."""
    if not preset.self_hosted:
        return preset_host(preset).endpoint(api_key, base_url)
    url = (base_url or preset.base_url or "").rstrip("/")
    if not url:
        raise ConfigError(
            f"{preset.title} has no usual address: use '{preset.name}:MODEL@BASE_URL' or pass base_url="
        )
    if api_key is None:
        api_key = from_environment((SELF_HOSTED_KEY_VARIABLE,))
    if api_key is not None or is_loopback(url):  # api_key="": a server that takes none
        return url, api_key or None
    raise MissingKeyError(
        f"no API key for {url_host(url) or url!r} ({preset.title})",
        variables=(SELF_HOSTED_KEY_VARIABLE,),
        in_code="pass api_key= (api_key='' for a server that takes none)",
    )


# ---------------------------------------------------------------------------------------------
# Azure OpenAI: AZURE_OPENAI_API_KEY (``api-key`` header) or an Entra token, for Azure's hosts only

AZURE_ENDPOINT_VARIABLE = "AZURE_OPENAI_ENDPOINT"
AZURE_KEY_VARIABLE = "AZURE_OPENAI_API_KEY"
AZURE_TOKEN_VARIABLE = "AZURE_OPENAI_AD_TOKEN"
AZURE_VERSION_VARIABLE = "AZURE_OPENAI_API_VERSION"
AZURE_DEFAULT_API_VERSION = "2024-10-21"
"""The latest GA ``api-version`` of the dated Chat Completions API (the Responses API is under ``/openai/v1``,
which takes none)."""
_AZURE_HOSTS = (".openai.azure.com", ".cognitiveservices.azure.com", ".services.ai.azure.com")


def is_azure_url(url: str) -> bool:
    return is_own_host(url, lambda host: host.endswith(_AZURE_HOSTS))


@dataclass(frozen=True, slots=True)
class AzureCredentials:
    endpoint: str
    """``https://RESOURCE.openai.azure.com``, no trailing slash."""
    api_key: str | None
    """Sent as ``api-key``."""
    ad_token: str | None
    """An Entra ID token, sent as ``Authorization: Bearer``; only without a key."""


def azure_credentials(endpoint: str | None, api_key: str | None, ad_token: str | None) -> AzureCredentials:
    """The endpoint (``endpoint=`` or ``AZURE_OPENAI_ENDPOINT``) and its credential: an explicit one, else
    ``AZURE_OPENAI_API_KEY`` / ``AZURE_OPENAI_AD_TOKEN``, read only for an https Azure host."""
    url = (endpoint or os.environ.get(AZURE_ENDPOINT_VARIABLE) or "").rstrip("/")
    if not is_http_url(url):
        raise ConfigError(
            f"Azure OpenAI needs its endpoint (https://RESOURCE.openai.azure.com): pass endpoint= or set "
            f"{AZURE_ENDPOINT_VARIABLE}"
        )
    if api_key or ad_token:
        return AzureCredentials(url, api_key or None, None if api_key else ad_token)
    if is_azure_url(url):
        key = from_environment((AZURE_KEY_VARIABLE,)) if api_key is None else None
        token = None if key else from_environment((AZURE_TOKEN_VARIABLE,))
        if key or token:
            return AzureCredentials(url, key, token)
        raise MissingKeyError(
            "no Azure OpenAI credential", variables=(AZURE_KEY_VARIABLE, AZURE_TOKEN_VARIABLE)
        )
    if api_key is not None or is_loopback(url):
        return AzureCredentials(url, None, None)
    raise MissingKeyError(
        f"no API key for {url_host(url)!r} ({AZURE_KEY_VARIABLE} and {AZURE_TOKEN_VARIABLE} are only sent "
        "to Azure's own hosts: *.openai.azure.com, ...)"
    )


# ---------------------------------------------------------------------------------------------
# Vertex AI: an OAuth access token (or an express-mode key) for Google's aiplatform hosts

_VERTEX_LOCATION = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")


_VERTEX_MULTI_REGION = frozenset({"us", "eu"})


def _is_vertex_host(host: str) -> bool:
    return (
        host == "aiplatform.googleapis.com"
        or host.endswith("-aiplatform.googleapis.com")
        or host in {f"aiplatform.{region}.rep.googleapis.com" for region in _VERTEX_MULTI_REGION}
    )


def vertex_host(location: str) -> str:
    """The Vertex AI host of ``location``: ``global``, a multi-region (``us``, ``eu``) or a region."""
    # The location becomes part of the host name: anything but a region name could change the host.
    if not _VERTEX_LOCATION.fullmatch(location):
        raise ConfigError(f"invalid Vertex AI location {location!r}")
    if location == "global":
        return "aiplatform.googleapis.com"
    if location in _VERTEX_MULTI_REGION:
        return f"aiplatform.{location}.rep.googleapis.com"
    return f"{location}-aiplatform.googleapis.com"


def is_vertex_url(url: str) -> bool:
    return is_own_host(url, _is_vertex_host)


def vertex_endpoint(
    base_url: str | None,
    api_key: str | None,
    access_token: str | None,
    project: str | None,
    location: str | None,
    *,
    publisher: str = "google",
    version: str = "v1beta1",
    authenticated: bool = False,
    express: bool = True,
) -> tuple[str, str | None, str | None]:
    """``(base_url, api_key, access_token)`` for Vertex AI; environment credentials only for Google's host.

    ``authenticated``: refreshing credentials (``toolwire.models._google_auth``) were given or found, so no
    token or key is needed. ``express``: the publisher takes express-mode API keys (Google's models do). The
    base URL ends at ``publishers/{publisher}``.
    """
    token = access_token or from_environment(("GOOGLE_ACCESS_TOKEN",))
    key = (api_key or from_environment(("GOOGLE_API_KEY",))) if express else None
    project = project or os.environ.get("GOOGLE_CLOUD_PROJECT")
    location = location or os.environ.get("GOOGLE_CLOUD_LOCATION") or "global"
    if base_url is None and project:
        host = vertex_host(location)
        base_url = f"https://{host}/{version}/projects/{project}/locations/{location}/publishers/{publisher}"
    elif base_url is None and token is None and not authenticated and express:  # API key, no project
        base_url = f"https://aiplatform.googleapis.com/{version}/publishers/{publisher}"
    if base_url is None:
        raise MissingKeyError(
            "Vertex AI needs a project",
            variables=("GOOGLE_CLOUD_PROJECT",),
            in_code="pass project= or base_url=",
        )
    if not is_vertex_url(base_url):
        token, key = access_token, api_key if express else None  # environment credentials: Google's host only
    if not token and not key and not authenticated and not is_loopback(base_url):
        raise MissingKeyError(
            f"no credentials for {url_host(base_url) or base_url!r} (GOOGLE_ACCESS_TOKEN and GOOGLE_API_KEY "
            "are only sent to aiplatform.googleapis.com)",
            in_code="pass access_token= or an express-mode api_key=",
        )
    return base_url.rstrip("/"), key, token


# ---------------------------------------------------------------------------------------------
# AWS: SigV4 credentials (botocore's default chain) or a Bedrock API key, for AWS hosts only

AWS_TOKEN_VARIABLE = "AWS_BEARER_TOKEN_BEDROCK"


def is_aws_url(url: str) -> bool:
    return is_own_host(url, lambda host: host.endswith((".amazonaws.com", ".amazonaws.com.cn", ".api.aws")))


def aws_api_key(api_key: str | None, base_url: str) -> str | None:
    """The explicit key, else ``AWS_BEARER_TOKEN_BEDROCK`` for an AWS host; another host gets no token."""
    if api_key is None and is_aws_url(base_url):
        return from_environment((AWS_TOKEN_VARIABLE,))
    return api_key


def missing_aws_credentials(base_url: str) -> MissingKeyError:
    if is_aws_url(base_url):
        return MissingKeyError(
            "no AWS credentials (configure the AWS default chain)",
            variables=("AWS_ACCESS_KEY_ID", "AWS_PROFILE", AWS_TOKEN_VARIABLE),
            in_code="pass credentials= or api_key=",
        )
    return MissingKeyError(
        f"no credentials for {url_host(base_url) or base_url!r} (the AWS default chain and "
        f"{AWS_TOKEN_VARIABLE} are only used with AWS hosts)",
        in_code="pass credentials= or api_key=",
    )


__all__ = [
    "ANTHROPIC",
    "AWS_TOKEN_VARIABLE",
    "AZURE_DEFAULT_API_VERSION",
    "AZURE_ENDPOINT_VARIABLE",
    "AZURE_KEY_VARIABLE",
    "AZURE_TOKEN_VARIABLE",
    "AZURE_VERSION_VARIABLE",
    "GEMINI_API",
    "OPENAI",
    "AzureCredentials",
    "Host",
    "aws_api_key",
    "azure_credentials",
    "from_environment",
    "is_aws_url",
    "is_azure_url",
    "is_http_url",
    "is_loopback",
    "is_own_host",
    "is_vertex_url",
    "missing_aws_credentials",
    "pick_key",
    "preset_endpoint",
    "preset_host",
    "url_host",
    "vertex_endpoint",
    "vertex_host",
]
