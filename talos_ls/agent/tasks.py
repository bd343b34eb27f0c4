"""Background tasks: each agent run is an asyncio task with a state, a transcript, and a cost.

States: queued (waiting for a slot under the concurrency limit), running, done, failed (an
error, its message kept), cancelled (by the person), stopped (a cost cap, step cap or the loop
guard), interrupted (the process running it died: killed, crashed, the machine went down).
Every state change and every model step saves the task's record, transcript included, to the
store, through the host's writer thread (in order, off the event loop); a storage failure is
logged and never takes the task or the daemon down. A save after the first adds only the
messages the transcript gained since the last (`Store.task_append`): a step's cost does not grow
with the transcript. Should the store hold another count (a write lost in between) the record
is written whole.

Interrupted tasks. Each record names its owner, the process that wrote it (`Owner`: machine,
boot, pid namespace, pid and the pid's start time, so a reused pid is told apart), and each
process holds a lease in the store, renewed every `lease_s / 4` seconds while it runs. A
process that starts, and every live one at each renewal, marks the queued and running tasks of
its agent whose owner is dead as `interrupted` (`recover`), each in one atomic step that
re-checks the state and the owner (`Store.task_interrupt`): of two processes recovering one
task, one does it. An owner is dead when it ran on this machine (same boot, same pid namespace)
and its pid is gone, a zombie, or another process's; for an owner elsewhere (a shared Redis),
when its lease has expired. A live process's tasks are never marked: on this machine its pid
says it is alive whatever its lease; elsewhere it renews its lease (a process paused or cut
off from the store past its lease may be marked, and its next record puts the true state back).

A daemon runs for weeks: a finished task leaves memory once KEEP_FINISHED newer ones have
finished (its record stays in the store, where `talos.task.show` reads it).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..offload import Offload
from ..store import Store, StoreError
from .cost import CapReached, CostMeter
from .model import ModelError

logger = logging.getLogger(__name__)
KEEP_FINISHED = 32
STATES = ("queued", "running", "done", "failed", "cancelled", "stopped", "interrupted")
FINAL = frozenset({"done", "failed", "cancelled", "stopped", "interrupted"})
LEASE_S = 60.0  # a process's lease in the store; renewed every quarter of it


def _proc_stat(pid: int | str) -> tuple[str, str] | None:
    """A process's state letter and start time (clock ticks since boot) from /proc; None when
    there is no such process (or no /proc)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read().decode("ascii", "replace")
    except OSError:
        return None
    fields = raw[raw.rfind(")") + 2 :].split()  # after the name, which may hold spaces
    return (fields[0], fields[19]) if len(fields) > 19 else None


def _read(path: str) -> str:
    try:
        with open(path) as fh:
            return fh.read().strip()
    except OSError:
        return ""


def _pid_namespace() -> str:
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return ""


@dataclass(frozen=True)
class Owner:
    """The process that writes a task record, as the record names it."""

    host: str
    boot: str  # the kernel's boot id: a pid means something only within one boot
    pidns: str  # and within one pid namespace (containers on one kernel share the boot id)
    pid: int
    start: str  # the pid's start time: a pid reused by another process has another
    nonce: str

    def encode(self) -> str:
        return "|".join(
            ("v1", self.host, self.boot, self.pidns, str(self.pid), self.start, self.nonce)
        )

    @classmethod
    def parse(cls, text: str) -> Owner | None:
        parts = text.split("|")
        if len(parts) != 7 or parts[0] != "v1" or not parts[4].isdigit():
            return None
        return cls(parts[1], parts[2], parts[3], int(parts[4]), parts[5], parts[6])

    @classmethod
    def current(cls) -> Owner:
        """This process (computed again after a fork)."""
        pid = os.getpid()
        if _CURRENT.get(pid) is None:
            stat = _proc_stat("self")
            _CURRENT[pid] = cls(
                socket.gethostname().replace("|", "_"),
                _read("/proc/sys/kernel/random/boot_id"),
                _pid_namespace(),
                pid,
                stat[1] if stat else "",
                uuid.uuid4().hex[:8],
            )
        return _CURRENT[pid]

    def alive_here(self) -> bool | None:
        """True or False when this machine can tell (same boot, same pid namespace, /proc);
        None otherwise: then only the lease can tell."""
        me = Owner.current()
        if not (self.boot and self.pidns and self.start) or (self.boot, self.pidns) != (
            me.boot,
            me.pidns,
        ):
            return None
        stat = _proc_stat(self.pid)
        return stat is not None and stat[0] not in ("Z", "X") and stat[1] == self.start


_CURRENT: dict[int, Owner] = {}


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
    # What it is doing now ("step 2: read_file"), for progress and status; never empty, so a
    # status sent as its state changes always says something.
    activity: str = "queued"
    follows: str | None = None  # the task this one follows up in a conversation
    # What it went on without the person's word (`host.with_assumptions` ends its result so).
    assumed: list[str] = field(default_factory=list)
    future: asyncio.Task | None = field(default=None, repr=False)


Runner = Callable[[Task], Awaitable[str]]
# The task whose work is running (None outside one): a prompt it raises is sent with its id.
CURRENT: contextvars.ContextVar[str | None] = contextvars.ContextVar("talos_task", default=None)


class TaskRegistry:
    def __init__(
        self,
        store: Store,
        meter: CostMeter,
        concurrency: int = 2,
        offload: Offload | None = None,
        on_change: Callable[[Task], None] | None = None,
        owner: Owner | None = None,
        lease_s: float = LEASE_S,
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
        self.owner = owner or Owner.current()
        self._owner = self.owner.encode()
        self.lease_s = lease_s
        self._lease_until = 0.0  # as last renewed by this registry
        # Each task's transcript as last saved: the list and its length then. The next save
        # of the same list adds what it gained; another list is written whole.
        self._saved: dict[str, tuple[list[dict[str, Any]], int]] = {}

    def start(self, agent_id: str, title: str, run: Runner) -> Task:
        """Queue a task; it runs when a slot is free. Call from the event loop."""
        task = Task(id="t" + uuid.uuid4().hex[:10], agent_id=agent_id, title=title[:120])
        self._tasks[task.id] = task
        self.save(task)
        task.future = asyncio.get_running_loop().create_task(self._run(task, run))
        return task

    async def _run(self, task: Task, run: Runner) -> None:
        CURRENT.set(task.id)  # this asyncio task's own context: what it awaits sees it
        try:
            async with self._slots:
                task.activity = "starting"  # running, before its first step reports
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
            self._saved.pop(gone, None)
            self.meter.forget(gone)

    def save(self, task: Task) -> None:
        """Queue the task's record for the store; returns at once. The row is taken now, on
        the caller's thread, so later changes to the task cannot tear it. Call from the
        event loop."""
        task.updated_at = time.time()
        saved = self._saved.get(task.id)
        at = None  # None: the record whole
        if saved is not None and saved[0] is task.transcript and saved[1] <= len(task.transcript):
            at = saved[1]
        self._saved[task.id] = (task.transcript, len(task.transcript))
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
            "owner": self._owner,
        }
        self.offload.write_soon(self._put, row, at)

    def _put(self, row: dict[str, Any], at: int | None) -> None:
        """In the writer thread: the lease first, so no record of ours is ever seen without
        one (it would look like a dead process's). Then the messages from `at` on, or (when
        `at` is None, or the store holds another count) the record whole."""
        if time.time() > self._lease_until - self.lease_s * 0.75:
            try:
                self.renew()
            except StoreError as exc:  # the record may still land; the lease is renewed later
                logger.warning("the lease could not be renewed: %s", exc)
        if at is not None and self.store.task_append(
            dict(row, transcript=row["transcript"][at:]), at
        ):
            return
        self.store.task_put(row)

    def renew(self) -> None:
        """Renew this process's lease (blocking)."""
        until = time.time() + self.lease_s
        self.store.owner_beat(self._owner, until)
        self._lease_until = until

    # ------------------------------------------------------------- recovery
    def _why_dead(self, owner: str | None, now: float) -> str | None:
        """Why the owner of a record is dead; None when it may be alive."""
        if owner == self._owner:
            return None
        if owner is None:
            return "it was left running by a talos-ls that did not record its process"
        who = Owner.parse(owner)
        where = f"process {who.pid} on {who.host}" if who else "its process"
        alive = who.alive_here() if who else None
        if alive is True:
            return None
        if alive is False:
            return f"talos-ls ({where}) stopped while it ran"
        lease = self.store.owner_lease(owner)
        if lease is None or lease < now:
            return f"talos-ls ({where}) stopped renewing its lease while it ran"
        return None

    def _recover(self, agent_id: str, mine: frozenset[str]) -> list[dict[str, Any]]:
        """In a worker thread: renew our lease, then mark the agent's open tasks of dead
        owners interrupted. The rows this process marked."""
        self.renew()
        now = time.time()
        marked = []
        for row in self.store.task_open(agent_id):
            if row["id"] in mine:
                continue
            reason = self._why_dead(row.get("owner"), now)
            if reason is None:
                continue
            updated = self.store.task_interrupt(
                row["id"], row.get("owner"), now, f"interrupted: {reason}"
            )
            if updated is not None:
                logger.info("task %s interrupted: %s", row["id"], reason)
                marked.append(updated)
        return marked

    async def recover(self, agent_id: str) -> list[Task]:
        """Mark the agent's tasks left queued or running by dead processes `interrupted`;
        they join the recent tasks (`list`). A storage failure is logged, never raised."""
        try:
            rows = await self.offload.run(self._recover, agent_id, frozenset(self._tasks))
        except (StoreError, OSError) as exc:
            logger.warning("interrupted tasks could not be recovered: %s", exc)
            return []
        tasks = []
        for row in rows:
            task = Task(
                id=row["id"],
                agent_id=row["agent_id"],
                title=row["title"],
                state=row["state"],
                created_at=row["created_at"],
                updated_at=row["updated_at"],
                error=row["error"],
            )
            if task.id not in self._tasks:
                self._tasks[task.id] = task
                self._retire(task)
                tasks.append(task)
        return tasks

    async def keep_alive(
        self, agent_id: str, stop: asyncio.Event, on_recovered: Callable[[list[Task]], None]
    ) -> None:
        """While the process runs: renew the lease and recover, every quarter lease."""
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), self.lease_s / 4)
                return
            except TimeoutError:
                pass
            recovered = await self.recover(agent_id)
            if recovered:
                on_recovered(recovered)

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
