"""A daemon runs for weeks: what it keeps in memory is bounded, and what leaves memory stays
in the store (and in the session's totals)."""

from __future__ import annotations

from decimal import Decimal

from talos_ls.agent.cost import CostMeter, Usage
from talos_ls.agent.tasks import KEEP_FINISHED, TaskRegistry
from talos_ls.edits.proposals import KEEP_APPLIED, ProposalBook
from talos_ls.store import open_store


async def test_finished_tasks_leave_memory_but_not_the_store_or_the_totals(tmp_path):
    store = open_store("sqlite:///" + str(tmp_path / "talos.db"))
    meter = CostMeter(prices={})
    registry = TaskRegistry(store, meter, concurrency=4)

    async def run(task):
        meter.add(task.id, "unpriced", Usage(10, 5, 0))
        return "ok"

    tasks = []
    for n in range(KEEP_FINISHED + 10):
        tasks.append(await registry.wait(registry.start("a", f"task {n}", run)))
    assert len(registry.list()) == KEEP_FINISHED
    assert registry.get(tasks[0].id) is None and registry.get(tasks[-1].id) is not None
    assert len(meter.tasks) == KEEP_FINISHED
    session = meter.session()
    assert (session.tokens_in, session.tokens_out) == (10 * len(tasks), 5 * len(tasks))
    assert store.task_get(tasks[0].id)["state"] == "done"  # still in the store
    assert meter.session_cost == Decimal(0)
    store.close()


def test_settled_proposals_leave_memory():
    book = ProposalBook()
    made = [book.create(f"f{n}.py", "a\n", "b\n") for n in range(KEEP_APPLIED + 5)]
    for p in made:
        book.applied(p.id, "b\n", None)
    rejected = book.create("r.py", "a\n", "b\n")
    book.reject(rejected.id)
    pending = book.create("p.py", "a\n", "b\n")
    book.prune()
    kept = book.list()
    assert pending in kept and rejected not in kept
    assert [p for p in kept if p.status == "applied"] == made[-KEEP_APPLIED:]
