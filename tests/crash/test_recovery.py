"""Tasks left queued or running by a dead process are marked interrupted; a live process's are
never marked. The store's steps (`task_open`, `task_interrupt`, owner leases) on every backend,
and the registry's judgement of owners: dead here (pid gone, pid reused), alive here (whatever
its lease), elsewhere (by its lease only)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time

import pytest

from talos_ls.agent.cost import CostMeter
from talos_ls.agent.tasks import FINAL, STATES, Owner, TaskRegistry
from talos_ls.offload import Offload


def _row(task_id, state="running", owner=None, created=1.0, agent="a1"):
    return {
        "id": task_id,
        "agent_id": agent,
        "state": state,
        "title": f"title {task_id}",
        "created_at": created,
        "updated_at": created,
        "cost": "0.01",
        "error": None,
        "transcript": [{"role": "user", "content": "do it"}],
        "owner": owner,
    }


def test_interrupted_is_a_final_state():
    assert "interrupted" in STATES and "interrupted" in FINAL


def test_task_open_lists_queued_and_running_oldest_first(store):
    store.task_put(_row("t2", "queued", "o", created=2.0))
    store.task_put(_row("t1", "running", "o", created=1.0))
    store.task_put(_row("t3", "done", "o", created=0.5))
    store.task_put(_row("t4", "running", "o", agent="a2"))
    assert [r["id"] for r in store.task_open("a1")] == ["t1", "t2"]
    assert store.task_open("a1")[0]["owner"] == "o"
    store.task_put(_row("t1", "done", "o", created=1.0))  # finished: no longer open
    assert [r["id"] for r in store.task_open("a1")] == ["t2"]


def test_task_interrupt_is_a_compare_and_set_on_state_and_owner(store):
    store.task_put(_row("t1", "running", "dead"))
    assert store.task_interrupt("t1", "other", 5.0, "interrupted: x") is None  # owner differs
    assert store.task_interrupt("t1", None, 5.0, "interrupted: x") is None
    row = store.task_interrupt("t1", "dead", 5.0, "interrupted: x")
    assert (row["state"], row["error"], row["updated_at"], row["owner"]) == (
        "interrupted",
        "interrupted: x",
        5.0,
        "dead",
    )
    assert row["transcript"] == [{"role": "user", "content": "do it"}]  # kept whole
    assert store.task_interrupt("t1", "dead", 6.0, "again") is None  # once
    assert store.task_get("t1")["state"] == "interrupted"
    assert store.task_open("a1") == []
    store.task_put(_row("t2", "done", "dead"))
    assert store.task_interrupt("t2", "dead", 5.0, "x") is None  # a finished task stays
    assert store.task_interrupt("nope", "dead", 5.0, "x") is None


def test_a_record_without_an_owner_is_matched_by_none(store):
    store.task_put(_row("t1", "queued", None))
    assert store.task_interrupt("t1", "someone", 5.0, "x") is None
    assert store.task_interrupt("t1", None, 5.0, "x")["state"] == "interrupted"


def test_owner_leases(store):
    assert store.owner_lease("o1") is None
    store.owner_beat("o1", 1e10)
    store.owner_beat("o1", 2e10)  # renewed: replaced
    assert store.owner_lease("o1") == 2e10
    assert store.owner_lease("o2") is None


@pytest.mark.parametrize("backend", ["redis"])  # the index is Redis's alone
def test_redis_indexes_records_written_before_the_open_index(store):
    """Records of a store written by a Talos without the `topen` index are found once."""
    store.task_put(_row("t1", "running", "o"))
    client = store._client
    client.delete("talos:{a1}:topen", "talos:{a1}:topen:v")
    assert [r["id"] for r in store.task_open("a1")] == ["t1"]


# ------------------------------------------------------------------ the registry's judgement
def _registry(store, lease_s=60.0):
    return TaskRegistry(store, CostMeter(prices={}), offload=Offload(workers=1), lease_s=lease_s)


def _dead_pid() -> tuple[int, str]:
    """A pid that existed on this machine and is gone (reaped), with its start time."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    start = _start_of(proc.pid)
    proc.kill()
    proc.wait()
    return proc.pid, start


def _start_of(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rsplit(")", 1)[1].split()[19]  # field 22: starttime


def _here(pid: int, start: str) -> str:
    me = Owner.current()
    return Owner(me.host, me.boot, me.pidns, pid, start, "n0").encode()


def _elsewhere() -> str:
    return Owner("other-machine", "another-boot-id", "1", 4242, "99", "n1").encode()


async def test_recovery_marks_dead_owners_and_never_live_ones(store):
    pid, start = _dead_pid()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        me = Owner.current()
        owners = {
            "dead_here": _here(pid, start),
            "pid_reused": _here(os.getpid(), "1"),  # our pid, another start time
            "live_here": _here(live.pid, _start_of(live.pid)),  # no lease at all: still alive
            "remote_live": _elsewhere(),
            "remote_expired": Owner("m2", "b2", "1", 7, "9", "n2").encode(),
            "remote_silent": Owner("m3", "b3", "1", 7, "9", "n3").encode(),
            "legacy": None,
        }
        store.owner_beat(owners["remote_live"], time.time() + 60)
        store.owner_beat(owners["remote_expired"], time.time() - 1)
        for n, (name, owner) in enumerate(owners.items()):
            store.task_put(_row(name, "running" if n % 2 else "queued", owner, created=n))
        store.task_put(_row("finished", "done", owners["dead_here"], created=99))
        registry = _registry(store)
        recovered = await registry.recover("a1")
        marked = {"dead_here", "pid_reused", "remote_expired", "remote_silent", "legacy"}
        assert {t.id for t in recovered} == marked
        for name in owners:
            state = store.task_get(name)["state"]
            assert state == "interrupted" if name in marked else state in ("queued", "running")
        assert {r["id"] for r in store.task_open("a1")} == {"live_here", "remote_live"}
        assert store.task_get("finished")["state"] == "done"
        # the recovered tasks are among the recent ones, final, their reason kept
        listed = {t.id: t for t in registry.list("a1")}
        assert set(listed) == marked and all(t.state == "interrupted" for t in listed.values())
        assert f"process {pid}" in listed["dead_here"].error
        assert "lease" in listed["remote_silent"].error
        assert store.owner_lease(registry.owner.encode()) > time.time()  # ours is held
        assert registry.owner == me
        # a second process recovering finds nothing left to mark
        assert await _registry(store).recover("a1") == []
    finally:
        live.kill()
        live.wait()


async def test_a_live_registry_keeps_its_own_tasks(store):
    """Its own open tasks are never marked by its recovery, nor by another registry's."""
    registry = _registry(store)
    gate = asyncio.Event()

    async def run(task):
        await gate.wait()
        return "ok"

    task = registry.start("a1", "waits", run)
    await asyncio.sleep(0.05)
    await registry.flush()
    assert store.task_get(task.id)["state"] == "running"
    assert await registry.recover("a1") == []
    assert await _registry(store).recover("a1") == []  # another one in this process
    assert store.task_get(task.id)["state"] == "running"
    gate.set()
    await registry.wait(task)
    assert store.task_get(task.id)["state"] == "done"
    assert store.task_get(task.id)["owner"] == registry.owner.encode()


async def test_a_running_process_marks_a_dead_owner_when_its_lease_expires(store):
    """Without a restart: keep_alive recovers every quarter lease."""
    owner = Owner("m4", "b4", "1", 7, "9", "n4").encode()
    store.owner_beat(owner, time.time() + 0.6)
    store.task_put(_row("t1", "running", owner))
    registry = _registry(store, lease_s=0.4)
    assert await registry.recover("a1") == []  # its lease still holds
    stop, seen = asyncio.Event(), []
    job = asyncio.ensure_future(registry.keep_alive("a1", stop, seen.extend))
    deadline = time.monotonic() + 30
    while not seen and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    stop.set()
    await asyncio.wait_for(job, 30)
    assert [t.id for t in seen] == ["t1"]
    assert store.task_get("t1")["state"] == "interrupted"
