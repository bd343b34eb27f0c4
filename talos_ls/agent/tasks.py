"""Background tasks: each agent run is an asyncio task with a state, a transcript, and a cost.

States: queued (waiting for a slot under the concurrency limit), running, done, failed (an
error, its message kept), cancelled (by the person), stopped (a cost cap, step cap or the loop
guard). Every state change and every model step saves the task's record, transcript included,
to the store, through the host's writer thread (in order, off the event loop); a storage
failure is logged and never takes the task or the daemon down.

A daemon runs for weeks: a finished task leaves memory once KEEP_FINISHED newer ones have
finished (its record stays in the store, where `talos.task.show` reads it).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..offload import Offload
from ..store import Store
from .cost import CapReached, CostMeter
from .model import ModelError

logger = logging.getLogger(__name__)
KEEP_FINISHED = 32
STATES = ("queued", "running", "done", "failed", "cancelled", "stopped")
FINAL = frozenset({"done", "failed", "cancelled", "stopped"})


@dataclass
class Task:
    id: str
    agent_id: str
    title: str
    state: str = "queued"
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)
    error: str | None = None
    result: str | None = None
    transcript: list[dict[str, Any]] = field(default_factory=list)
    # What the person said while the task ran (an answer to a question): the loop adds it to
    # the conversation before its next model call.
    notes: list[str] = field(default_factory=list)
    activity: str = ""  # what it is doing now ("step 2: read_file"), for progress and status
    future: asyncio.Task | None = field(default=None, repr=False)


Runner = Callable[[Task], Awaitable[str]]


class TaskRegistry:
    def __init__(
        self,
        store: Store,
        meter: CostMeter,
        concurrency: int = 2,
        offload: Offload | None = None,
        on_change: Callable[[Task], None] | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        self.store = store
        self.meter = meter
        self.offload = offload or Offload(workers=1)
        self.on_change = on_change  # a state changed: the host reports status
        self._slots = asyncio.Semaphore(concurrency)
        self._tasks: dict[str, Task] = {}
        self._finished: list[str] = []  # oldest first

    def start(self, agent_id: str, title: str, run: Runner) -> Task:
        """Queue a task; it runs when a slot is free. Call from the event loop."""
        task = Task(id="t" + uuid.uuid4().hex[:10], agent_id=agent_id, title=title[:120])
        self._tasks[task.id] = task
        self.save(task)
        task.future = asyncio.get_running_loop().create_task(self._run(task, run))
        return task

    async def _run(self, task: Task, run: Runner) -> None:
        try:
            async with self._slots:
                self._set(task, "running")
                task.result = await run(task)
                self._set(task, "done")
        except asyncio.CancelledError:
            self._set(task, "cancelled")
        except CapReached as exc:
            self._set(task, "stopped", str(exc))
        except ModelError as exc:
            self._set(task, "failed", str(exc))
        except Exception as exc:
            logger.exception("task %s failed", task.id)
            self._set(task, "failed", f"{type(exc).__name__}: {exc}")

    def _set(self, task: Task, state: str, error: str | None = None) -> None:
        task.state = state
        if error is not None:
            task.error = error
        self.save(task)
        if state in FINAL:
            self._retire(task)
        if self.on_change is not None:
            self.on_change(task)

    def _retire(self, task: Task) -> None:
        self._finished.append(task.id)
        while len(self._finished) > KEEP_FINISHED:
            gone = self._finished.pop(0)
            self._tasks.pop(gone, None)
            self.meter.forget(gone)

    def save(self, task: Task) -> None:
        """Queue the task's record for the store; returns at once. The row is taken now, on
        the caller's thread, so later changes to the task cannot tear it."""
        task.updated_at = time.time()
        row = {
            "id": task.id,
            "agent_id": task.agent_id,
            "state": task.state,
            "title": task.title,
            "created_at": task.created_at,
            "updated_at": task.updated_at,
            "cost": str(self.meter.task(task.id).cost),
            "error": task.error,
            "transcript": list(task.transcript),
        }
        self.offload.write_soon(self.store.task_put, row)

    async def flush(self) -> None:
        """Wait until every record queued so far is in the store."""
        await self.offload.drain()

    def get(self, task_id: str) -> Task | None:
        return self._tasks.get(task_id)

    def list(self, agent_id: str | None = None) -> list[Task]:
        return [t for t in self._tasks.values() if agent_id is None or t.agent_id == agent_id]

    def cancel(self, task_id: str) -> bool:
        task = self._tasks.get(task_id)
        if task is None or task.state in FINAL or task.future is None:
            return False
        return task.future.cancel()

    async def wait(self, task: Task) -> Task:
        if task.future is not None:
            await asyncio.gather(task.future, return_exceptions=True)
        await self.flush()
        return task

    async def shutdown(self) -> None:
        """Cancel every running task and wait for them (a daemon stopping)."""
        live = [t.future for t in self._tasks.values() if t.future and not t.future.done()]
        for future in live:
            future.cancel()
        await asyncio.gather(*live, return_exceptions=True)
        await self.flush()
