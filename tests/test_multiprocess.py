"""Eight OS processes share one store and drive the same agent, turn by turn.

Every atomic step must hold across processes: never more than one delivery in any K-turn window,
no candidate delivered twice in one turn, and a burst of identical proposals leaves one
candidate."""

from __future__ import annotations

import itertools
import multiprocessing as mp

import pytest

from talos_ls.gates.question_queue import QuestionQueue
from talos_ls.memory.facts import FactStore
from talos_ls.store import open_store

PROCS, TURNS, K = 8, 300, 5
pytestmark = pytest.mark.slow


def run_processes(target, url):
    """PROCS spawned processes running target(url, barrier, results); their results, which must
    not be exceptions."""
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(PROCS), ctx.Queue()
    procs = [ctx.Process(target=target, args=(url, barrier, results)) for _ in range(PROCS)]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    errors = [o for o in outcomes if isinstance(o, Exception)]
    assert not errors, errors
    return outcomes


def worker(url, barrier, results):
    store = open_store(url)
    qq = QuestionQueue(store)
    try:
        barrier.wait(timeout=60)
        burst = [
            qq.propose("a1", "Shall we burst?", "confirmation", "t", ["burst"], "gate_refusal", 0)
            for _ in range(5)
        ]
        deliveries = []
        for turn in range(TURNS):
            barrier.wait(timeout=60)  # every process reaches each turn together: maximum contention
            group = turn // 4
            qq.propose("a1", f"Question {group}?", "referent", "t", [f"k{group}"],
                       "evidence_gap", turn)  # fmt: skip
            qq.note_use("a1", [f"k{group}", f"k{group - 1}"], turn)
            got = qq.next_question("a1", turn)
            if got is not None:
                deliveries.append((turn, got.candidate_id))
        results.put(([c.candidate_id if c else None for c in burst], deliveries))
    except Exception as exc:  # surface anything unexpected to the parent
        results.put(exc)
    finally:
        store.close()


def test_eight_processes_share_one_budget(store_url):
    url = store_url
    open_store(url).close()  # create the schema once, as a daemon would on first start
    outcomes = run_processes(worker, url)

    burst_ids = {cid for ids, _ in outcomes for cid in ids}
    assert len(burst_ids) == 1 and None not in burst_ids

    deliveries = sorted(d for _, ds in outcomes for d in ds)
    turns = [t for t, _ in deliveries]
    assert len(turns) == len(set(turns)), "two deliveries in one turn"
    assert all(b - a >= K for a, b in itertools.pairwise(turns)), turns
    # Every process saw every turn together and a fresh question each time: the budget is the
    # only limit, so deliveries land exactly on 0, K, 2K, ...
    assert turns == list(range(0, TURNS, K))

    store = open_store(url)
    qq = QuestionQueue(store)
    cands = qq.candidates("a1")
    by_id = {c.candidate_id: c for c in cands}
    for _, cid in deliveries:  # ignored questions are cooled, then expire; never answered here
        assert by_id[cid].status in ("delivered", "cooled", "expired")
    delivered_counts = {}
    for _, cid in deliveries:
        delivered_counts[cid] = delivered_counts.get(cid, 0) + 1
    assert all(by_id[cid].ask_count == n for cid, n in delivered_counts.items())
    texts = [c.question_text for c in cands]
    assert len(texts) == len(set(texts)), "identical proposals made two candidates"
    assert texts.count("Shall we burst?") == 1
    store.close()


def cold_start(url, barrier, results):
    try:
        barrier.wait(timeout=60)
        store = open_store(url)
        key = FactStore(store).add("a1", "opened at once")
        store.close()
        results.put(key)
    except Exception as exc:
        results.put(exc)


def test_eight_daemons_open_a_new_store_at_once(store_url):
    url = store_url
    outcomes = run_processes(cold_start, url)
    store = open_store(url)
    # The same statement from eight processes: each got a stored fact's key (a repeat gets
    # the held one; two adding at the same instant may both store theirs), and no row is
    # one that nobody was told of.
    assert {f.key for f in FactStore(store).list("a1")} == set(outcomes)
    store.close()
