"""A task's transcript grows by `task_append`: a step adds its messages to the stored transcript
instead of writing it whole, on every backend; a count that does not match (a write lost in
between) changes nothing and says so; a transcript an earlier version kept in the record is
read first. And the registry: it appends after the first save, and writes the record whole
when the store holds another count."""

from __future__ import annotations

import asyncio
import json
import sqlite3

from talos_ls.agent.cost import CostMeter
from talos_ls.agent.tasks import Task, TaskRegistry
from talos_ls.offload import Offload
from talos_ls.store import open_store
from talos_ls.store.sqlite import SQLiteStore


def _row(transcript, state="running", error=None, task_id="t1", updated=2.0):
    return {
        "id": task_id,
        "agent_id": "a1",
        "state": state,
        "title": "Fix it",
        "created_at": 1.0,
        "updated_at": updated,
        "cost": "0.01",
        "error": error,
        "transcript": transcript,
        "owner": "o",
    }


def _msgs(a, b):
    return [
        {"role": "tool", "tool_call_id": f"c{i}", "content": f"out é\n{i}"} for i in range(a, b)
    ]


def test_append_adds_a_steps_messages_and_sets_the_fields(store):
    store.task_put(_row(_msgs(0, 2)))
    assert store.task_append(_row(_msgs(2, 5), error="half", updated=3.0), 2)
    row = store.task_get("t1")
    assert row["transcript"] == _msgs(0, 5)
    assert (row["error"], row["updated_at"], row["state"]) == ("half", 3.0, "running")
    # a state change only: no messages; a field back to None
    assert store.task_append(_row([], state="done", updated=4.0), 5)
    row = store.task_get("t1")
    assert (row["state"], row["error"], row["updated_at"]) == ("done", None, 4.0)
    assert row["transcript"] == _msgs(0, 5)
    assert store.task_open("a1") == []
    assert store.task_list("a1") == [row]


def test_append_at_another_count_changes_nothing(store):
    assert not store.task_append(_row(_msgs(0, 1)), 0)  # no such record
    assert store.task_get("t1") is None
    store.task_put(_row(_msgs(0, 3)))
    before = store.task_get("t1")
    assert not store.task_append(_row(_msgs(4, 6), state="done", updated=9.0), 4)  # one lost
    assert not store.task_append(_row(_msgs(1, 2), state="done", updated=9.0), 1)
    assert store.task_get("t1") == before
    assert [r["id"] for r in store.task_open("a1")] == ["t1"]  # still open


def test_put_replaces_the_transcript_and_open_and_interrupt_carry_it(store):
    store.task_put(_row(_msgs(0, 4)))
    store.task_put(_row(_msgs(10, 12)))  # another transcript: written whole
    assert store.task_get("t1")["transcript"] == _msgs(10, 12)
    assert store.task_append(_row(_msgs(12, 13)), 2)
    assert store.task_open("a1")[0]["transcript"] == _msgs(10, 13)
    row = store.task_interrupt("t1", "o", 5.0, "interrupted: gone")
    assert row["state"] == "interrupted" and row["transcript"] == _msgs(10, 13)


def test_a_large_transcript_round_trips(store):
    many = _msgs(0, 2500)  # more messages than one Lua call takes arguments
    store.task_put(_row(many[:1200]))
    assert store.task_append(_row(many[1200:]), 1200)
    assert store.task_get("t1")["transcript"] == many


def test_a_transcript_an_earlier_version_kept_in_the_record_is_read(store):
    store.task_put(_row([]))
    legacy = _msgs(0, 3)
    if isinstance(store, SQLiteStore):
        with store._write() as conn:
            conn.execute(
                "UPDATE tasks SET transcript = ? WHERE id = 't1'",
                (json.dumps(legacy),),
            )
    else:
        key = "talos:{a1}:t:t1"
        store._client.hset(key, "transcript", json.dumps(legacy))
    assert store.task_get("t1")["transcript"] == legacy
    assert not store.task_append(_row(_msgs(3, 4)), 3)  # not in the new layout: written whole
    store.task_put(_row(_msgs(0, 4)))
    assert store.task_get("t1")["transcript"] == _msgs(0, 4)
    assert store.task_append(_row(_msgs(4, 5)), 4)
    assert store.task_get("t1")["transcript"] == _msgs(0, 5)


def test_sqlite_migrates_a_version_5_file_and_reads_its_transcripts(tmp_path):
    from talos_ls.store.sqlite import APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION

    path = tmp_path / "v5.db"
    conn = sqlite3.connect(path)
    for step in MIGRATIONS[:5]:
        for statement in step:
            conn.execute(statement)
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute("PRAGMA user_version = 5")
    conn.execute(
        "INSERT INTO tasks VALUES ('t1', 'a1', 'done', 'Fix it', 1.0, 2.0, '0', NULL, "
        """'[{"role":"user","content":"hi"}]', 'o')"""
    )
    conn.commit()
    conn.close()
    store = open_store("sqlite:///" + str(path))
    try:
        assert store.task_get("t1")["transcript"] == [{"role": "user", "content": "hi"}]
    finally:
        store.close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION >= 6
    conn.close()


class _Counting:
    """The store, counting whole writes and appends; `lose` drops the next append."""

    def __init__(self, target):
        self.target = target
        self.puts = self.appends = 0
        self.lose = False

    def __getattr__(self, name):
        return getattr(self.target, name)

    def task_put(self, row):
        self.puts += 1
        self.target.task_put(row)

    def task_append(self, row, at):
        self.appends += 1
        if self.lose:
            self.lose = False
            return True  # as if written, and lost
        return self.target.task_append(row, at)


async def test_the_registry_appends_each_step_and_writes_whole_after_a_lost_write(store):
    counting = _Counting(store)
    offload = Offload(workers=1)
    registry = TaskRegistry(counting, CostMeter(prices={}), offload=offload)
    try:
        steps = asyncio.Event()
        go = asyncio.Event()

        async def run(task: Task) -> str:
            task.transcript = [{"role": "user", "content": "go"}]  # a new list: written whole
            for i in range(5):
                task.transcript.append({"role": "assistant", "content": f"step {i}"})
                registry.save(task)
            steps.set()
            await go.wait()
            return "done"

        task = registry.start("a1", "Fix it", run)
        await steps.wait()
        await registry.flush()
        assert store.task_get(task.id)["transcript"] == task.transcript
        puts = counting.puts
        assert puts == 2 and counting.appends >= 5  # queued, then the new list; steps appended
        counting.lose = True  # the next write is lost: the one after writes the record whole
        task.transcript.append({"role": "user", "content": "a note"})
        registry.save(task)
        task.transcript.append({"role": "assistant", "content": "last"})
        registry.save(task)
        await registry.flush()
        assert counting.puts == puts + 1
        assert store.task_get(task.id)["transcript"] == task.transcript
        go.set()
        await registry.wait(task)
        row = store.task_get(task.id)
        assert row["state"] == "done" and row["transcript"] == task.transcript
    finally:
        await registry.shutdown()
        offload.close()
