"""The store's health, as a daemon that runs for weeks sees it.

A disk fills, a mount turns read-only, a database file is damaged, Redis stops, slows down or
restarts. The daemon must go on answering the editor, ask no question it cannot record, say
ONCE what is wrong and how to fix it, and take the store back by itself when it returns.

- Every store call goes through `GuardedStore`: a StoreError whose reason is a fault (not
  another writer's lock held past the timeout, not a closed handle) turns the health
  *degraded*: one `window/showMessage` naming the problem and its fix, and `talos/status`
  says `store: {available: false, problem}`.
- While degraded, every store call fails at once with that problem (a circuit breaker): the
  daemon does not wait out a timeout per call, the question queue fails closed (no question is
  delivered or counted), a fact or an answer is reported as not stored, a task cannot start.
  Nothing is acknowledged that was not written.
- A recovery probe runs while degraded: soon, then backing off to every PROBE_MAX_S, and at
  once (at most every PROBE_MIN_S) when the person asks for something that needs the store.
  It reopens a file store (a file moved aside, a mount made writable again) or opens one that
  never opened, then proves a write lands, that there is room to grow, and that every page
  reads (`Store.probe`). When it passes, the daemon is told (`on_recovered`: folders that
  waited are served, task records that could not be written are written), one message says
  the store is back, and the status says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ..store import Store, StoreError, faults

logger = logging.getLogger(__name__)
PROBE_FIRST_S = 0.5
PROBE_MAX_S = 5.0
PROBE_MIN_S = 0.5  # a request needing the store probes at once, but not more often than this
PROBE_WAIT_S = 1.0  # how long such a request waits for that probe before it is answered
PASS_THROUGH = frozenset(("close", "local_files", "probe"))
NOT_FAULTS = (faults.BUSY, faults.CLOSED, faults.REFUSED)


class StoreHealth:
    """Whether the store works; thread-safe (store calls run in worker threads)."""

    def __init__(
        self,
        url: str,
        notice: Callable[[str], None],
        on_change: Callable[[], None],
        probe: Callable[[], Awaitable[None]],
        on_recovered: Callable[[], Awaitable[None]],
    ) -> None:
        self.url = url
        self.notice = notice
        self.on_change = on_change
        self._probe = probe
        self._on_recovered = on_recovered
        self._lock = threading.Lock()
        self.problem: str | None = None
        self.reason: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._recovery: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._last_probe = 0.0
        self._probed = asyncio.Event()

    @property
    def available(self) -> bool:
        return self.problem is None

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    # ------------------------------------------------------------ failures
    def check(self) -> None:
        """Raise the problem at once while the store is failing."""
        problem, reason = self.problem, self.reason
        if problem is not None:
            raise StoreError(f"Talos's store is unavailable: {problem}", reason or faults.OTHER)

    def failed(self, exc: StoreError) -> None:
        """A store call failed; from any thread. Faults degrade the health, once."""
        if exc.reason in NOT_FAULTS:
            return
        text = faults.describe(self.url, exc, "storeUrl")
        with self._lock:
            first = self.problem is None
            self.problem, self.reason = text, exc.reason
        if not first:
            return
        logger.warning("the store is failing: %s", text)
        loop = self._loop
        if loop is None:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._degraded(text)
        else:
            loop.call_soon_threadsafe(self._degraded, text)

    def _degraded(self, text: str) -> None:
        self.notice(
            f"Talos's store is unavailable: {text}. Questions are paused and tasks "
            "cannot start until it is back; Talos checks again by itself."
        )
        self.on_change()
        if self._recovery is None or self._recovery.done():
            self._recovery = asyncio.ensure_future(self._recover())

    # ------------------------------------------------------------ recovery
    async def _recover(self) -> None:
        delay = PROBE_FIRST_S
        while self.problem is not None:
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), delay)
            if await self._attempt():
                return
            delay = min(delay * 2, PROBE_MAX_S)

    async def _attempt(self) -> bool:
        """One probe; True when the store is back (and the daemon told)."""
        self._last_probe = time.monotonic()
        ok = False
        try:
            await self._probe()
        except StoreError as exc:
            with self._lock:
                if exc.reason not in NOT_FAULTS:
                    self.problem, self.reason = (
                        faults.describe(self.url, exc, "storeUrl"),
                        exc.reason,
                    )
            logger.info("the store is still failing: %s", exc)
        except Exception:
            logger.exception("the store probe failed")
        else:
            ok = True
            with self._lock:
                self.problem = self.reason = None
            try:
                await self._on_recovered()
            except Exception:
                logger.exception("taking the store back failed")
            self.notice(
                f"Talos's store is available again ({faults.where_of(self.url)}): "
                "tasks and questions work again."
            )
        self._probed.set()
        self._probed = asyncio.Event()
        self.on_change()
        return ok

    async def poke(self) -> None:
        """The person asked for something that needs the store: while degraded, probe now
        (at most every PROBE_MIN_S) and wait a moment for it."""
        if self.problem is None or self._recovery is None or self._recovery.done():
            return
        if time.monotonic() - self._last_probe >= PROBE_MIN_S:
            self._wake.set()
        probed = self._probed
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(probed.wait(), PROBE_WAIT_S)

    async def close(self) -> None:
        if self._recovery is not None:
            self._recovery.cancel()
            await asyncio.gather(self._recovery, return_exceptions=True)


class GuardedStore:
    """A Store whose every call reports a failure to the health, and which fails at once while
    the health is degraded. `target` may be swapped (a reopened store) under the hosts."""

    def __init__(self, target: Store, health: StoreHealth) -> None:
        self.target = target
        self.health = health

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.target, name)
        if not callable(value) or name in PASS_THROUGH or name.startswith("_"):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            self.health.check()
            try:
                return getattr(self.target, name)(*args, **kwargs)
            except StoreError as exc:
                self.health.failed(exc)
                raise

        call.__name__ = name
        return call
