"""Test-wide guards: no real network access to providers."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import settings

# CI explores a fixed sequence of examples (a landing must not depend on luck); developers' runs explore
# new random examples each time and keep failures in .hypothesis/ for replay.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

# google-auth reads this once, at import: never ask a cloud VM's metadata server for credentials in tests.
os.environ["NO_GCE_CHECK"] = "true"

_ALLOWED_HOSTS = {"127.0.0.1", "localhost", "::1", "0.0.0.0"}
_real_connect = socket.socket.connect


def _guarded_connect(self: socket.socket, address: Any) -> Any:
    host = address[0] if isinstance(address, tuple) else None
    if host is not None and host not in _ALLOWED_HOSTS and not str(host).startswith("127."):
        raise RuntimeError(f"network access blocked in tests: {address!r}")
    return _real_connect(self, address)


@pytest.fixture(autouse=True)
def _block_network(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    monkeypatch.setattr(socket.socket, "connect", _guarded_connect)
    # Google Application Default Credentials: never this machine's (gcloud's folder, a credentials file),
    # never the metadata server of a cloud VM; tests that want ADC set GOOGLE_APPLICATION_CREDENTIALS.
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path_factory.getbasetemp() / "no-gcloud"))
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    yield
