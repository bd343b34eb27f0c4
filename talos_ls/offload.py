"""The one boundary between the event loop and blocking work.

A language server's event loop answers every request of the editor; anything that touches the
disk, the store or the CPU for more than a moment runs here instead, in threads the host owns:

- `run(fn, ...)`: a worker pool, for reads, parsing, turn preparation and tool work;
- `write_soon(fn, ...)`: one writer thread, so writes land in the order they were made (a task's
  records are whole-row upserts: an older one landing last would undo a newer state). A failed
  write is logged and never reaches the caller: the task goes on, the daemon stays up.

Like jedi-language-server's `@server.thread()` marks and httpx's sync/async split, the point is
that each blocking call is visibly marked at its call site.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

logger = logging.getLogger(__name__)
T = TypeVar("T")


class Offload:
    def __init__(self, workers: int = 4, name: str = "talos") -> None:
        self._pool = concurrent.futures.ThreadPoolExecutor(workers, f"{name}-work")
        self._writer = concurrent.futures.ThreadPoolExecutor(1, f"{name}-write")
        # Its thread started now, not at the first write (a task's first step): a thread's
        # start waits for the new thread to run, which other busy threads can make long.
        self._last_write: concurrent.futures.Future[Any] | None = self._writer.submit(int)
        self._lock = threading.Lock()

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """`fn(*args, **kwargs)` in a worker thread; its result or its exception."""
        call = functools.partial(fn, *args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(self._pool, call)

    def write_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        """Queue a write behind every earlier one; returns at once."""

        def write() -> None:
            try:
                fn(*args)
            except Exception:
                logger.exception("a background write failed")

        with self._lock:
            self._last_write = self._writer.submit(write)

    async def drain(self) -> None:
        """Wait until every write queued so far has landed."""
        with self._lock:
            last = self._last_write
        if last is not None:
            await asyncio.wrap_future(last)

    def close(self) -> None:
        """Let queued writes finish, then stop the threads."""
        self._writer.shutdown(wait=True)
        self._pool.shutdown(wait=False, cancel_futures=True)
