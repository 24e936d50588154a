"""A PostgreSQL outage for the processes of one test only: a TCP proxy in front of the shared test server whose
link can be cut (every connection through it reset, new ones reset at once) and restored. Stopping the server
itself would fail the other tests using it at the same moment; this fails only the clients behind the proxy,
exactly when the test says so."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from sqlalchemy.engine import make_url


class CuttableLink:
    """Forwards TCP connections to ``host:port`` until :meth:`cut`; :meth:`restore` lets them through again."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.target_port = port
        self.port = 0
        self.up = True
        self.refused = 0
        """Connections reset at once because the link was cut."""
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def cut(self) -> None:
        """The database is gone: every open connection is reset, and so is every new one until restored."""
        self.up = False
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()

    def restore(self) -> None:
        self.up = True

    def url(self, url: str) -> str:
        """``url`` (a PostgreSQL URL) through this link."""
        return make_url(url).set(host="127.0.0.1", port=self.port).render_as_string(hide_password=False)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self.up:
            self.refused += 1
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(self.host, self.target_port)
        except OSError:
            writer.transport.abort()
            return
        self._writers.update((writer, up_writer))
        try:
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            for w in (writer, up_writer):
                self._writers.discard(w)
                w.transport.abort()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError, asyncio.IncompleteReadError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    writer.transport.abort()


@contextlib.asynccontextmanager
async def cuttable_link(url: str) -> AsyncIterator[CuttableLink]:
    """A :class:`CuttableLink` to the server of ``url``, started; closed afterwards."""
    parsed = make_url(url)
    link = CuttableLink(parsed.host or "127.0.0.1", parsed.port or 5432)
    await link.start()
    try:
        yield link
    finally:
        await link.close()
