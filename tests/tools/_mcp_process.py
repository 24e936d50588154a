"""Start a test MCP server script as a real streamable-HTTP server on loopback, and stop it."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def serve_http(script: Path, *args: str) -> Iterator[str]:
    """Run ``python script http PORT *args`` until the port accepts connections; yields its ``/mcp`` URL."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(script), "http", str(port), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, process.stderr.read().decode() if process.stderr else "exited"
            assert time.monotonic() < deadline, f"the MCP HTTP server {script.name} did not start"
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)
