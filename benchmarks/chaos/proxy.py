"""A small TCP proxy the harness controls: one per (host, service), so a fault can delay or
cut one host's link to PostgreSQL or the broker while the others carry on.

`delay_s` holds every chunk that long in each direction; `cut()` closes every connection and
refuses new ones until `heal()`. Loopback only.
"""

from __future__ import annotations

import asyncio


class Proxy:
    def __init__(self, name: str, upstream_port: int) -> None:
        self.name = name
        self.upstream_port = upstream_port
        self.port = 0
        self.delay_s = 0.0
        self.cut_off = False
        self._server: asyncio.Server | None = None
        self._links: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        self.cut()

    def cut(self) -> None:
        """Drop every open connection (both ends) and refuse new ones."""
        self.cut_off = True
        for writer in list(self._links):
            writer.transport.abort()

    def heal(self) -> None:
        self.cut_off = False
        self.delay_s = 0.0

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.cut_off:
            writer.close()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            writer.close()
            return
        pair = {writer, up_writer}
        self._links |= pair
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self._pipe(reader, up_writer))
                group.create_task(self._pipe(up_reader, writer))
        except* (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            self._links -= pair
            for w in pair:
                w.transport.abort()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65536):
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            writer.write(data)
            await writer.drain()
        # One side closed: close the other so the pair ends together.
        raise OSError("closed")
