"""``Inbox``: what a step's running tools send the loop (their start and end, progress, a sub-agent's events).

A deque and one waiter future: ``asyncio.Queue`` costs a future per ``get`` and a wake-up bookkeeping per
``put`` (getters, putters, unfinished-task counting) on every tool step, for a queue with one reader and no
size limit. Single event loop, like the queue it replaces.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

TICK: Any = object()
"""What :meth:`Inbox.get` returns when ``interval`` passed without an item (time for heartbeats)."""


class Inbox:
    __slots__ = ("_items", "_waiter")

    def __init__(self) -> None:
        self._items: deque[Any] = deque()
        self._waiter: asyncio.Future[None] | None = None

    def put_nowait(self, item: Any) -> None:
        self._items.append(item)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def empty(self) -> bool:
        return not self._items

    def get_nowait(self) -> Any:
        """The oldest item (``IndexError`` when empty)."""
        return self._items.popleft()

    async def get(self, interval: float | None = None) -> Any:
        """The oldest item, waiting for one; :data:`TICK` when ``interval`` seconds passed without one."""
        while not self._items:
            waiter = self._waiter = asyncio.get_running_loop().create_future()
            try:
                if not interval:
                    await waiter
                else:
                    try:
                        async with asyncio.timeout(interval):
                            await waiter
                    except TimeoutError:
                        if not self._items:
                            return TICK
            finally:
                self._waiter = None
        return self._items.popleft()
