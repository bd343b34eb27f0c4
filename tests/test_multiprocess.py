"""Eight OS processes share one store and drive the same agent, turn by turn.

Every atomic step must hold across processes: never more than one delivery in any K-turn window,
no candidate delivered twice in one turn, and a burst of identical proposals leaves one
candidate. On a Redis Cluster the same holds for agents whose keys live on each of its three
masters, driven at once."""

from __future__ import annotations

import itertools

import pytest

from talos_ls.gates.question_queue import QuestionQueue
from talos_ls.memory.facts import FactStore
from talos_ls.store import open_store

from .system import processes

PROCS, TURNS, K = 8, 300, 5
pytestmark = pytest.mark.slow


def run_processes(target, url, *extra):
    """PROCS spawned processes running target(url, barrier, results, *extra); their results,
    which must not be exceptions."""
    ctx = processes()
    barrier, results = ctx.Barrier(PROCS), ctx.Queue()
    procs = [ctx.Process(target=target, args=(url, barrier, results, *extra)) for _ in range(PROCS)]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    errors = [o for o in outcomes if isinstance(o, Exception)]
    assert not errors, errors
    return outcomes


def worker(url, barrier, results, agents=("a1",), turns=TURNS):
    store = open_store(url)
    qq = QuestionQueue(store)
    try:
        barrier.wait(timeout=60)
        burst = [
            qq.propose(agent, "Shall we burst?", "confirmation", "t", ["burst"], "gate_refusal", 0)
            for _ in range(5)
            for agent in agents
        ]
        deliveries = []
        for turn in range(turns):
            barrier.wait(timeout=60)  # every process reaches each turn together: maximum contention
            group = turn // 4
            for agent in agents:
                qq.propose(
                    agent,
                    f"Question {group}?",
                    "referent",
                    "t",
                    [f"k{group}"],
                    "evidence_gap",
                    turn,
                )
                qq.note_use(agent, [f"k{group}", f"k{group - 1}"], turn)
                got = qq.next_question(agent, turn)
                if got is not None:
                    deliveries.append((agent, turn, got.candidate_id))
        results.put(([c.candidate_id if c else None for c in burst], deliveries))
    except Exception as exc:  # surface anything unexpected to the parent
        results.put(exc)
    finally:
        store.close()


def test_eight_processes_share_one_budget(store_url):
    url = store_url
    open_store(url).close()  # create the schema once, as a daemon would on first start
    outcomes = run_processes(worker, url)

    check_one_budget_per_agent(url, outcomes, ("a1",), TURNS)


def check_one_budget_per_agent(url, outcomes, agents, turns_run):
    """0 budget violations and 0 duplicates, per agent."""
    burst_ids = {cid for ids, _ in outcomes for cid in ids}
    assert len(burst_ids) == len(agents) and None not in burst_ids

    store = open_store(url)
    qq = QuestionQueue(store)
    for agent in agents:
        deliveries = sorted((t, cid) for _, ds in outcomes for a, t, cid in ds if a == agent)
        turns = [t for t, _ in deliveries]
        assert len(turns) == len(set(turns)), f"{agent}: two deliveries in one turn"
        assert all(b - a >= K for a, b in itertools.pairwise(turns)), (agent, turns)
        # Every process saw every turn together and a fresh question each time: the budget is
        # the only limit, so deliveries land exactly on 0, K, 2K, ...
        assert turns == list(range(0, turns_run, K)), agent

        cands = qq.candidates(agent)
        by_id = {c.candidate_id: c for c in cands}
        for _, cid in deliveries:  # ignored questions are cooled, then expire; never answered
            assert by_id[cid].status in ("delivered", "cooled", "expired")
        delivered_counts: dict[str, int] = {}
        for _, cid in deliveries:
            delivered_counts[cid] = delivered_counts.get(cid, 0) + 1
        assert all(by_id[cid].ask_count == n for cid, n in delivered_counts.items())
        texts = [c.question_text for c in cands]
        assert len(texts) == len(set(texts)), f"{agent}: identical proposals made two candidates"
        assert texts.count("Shall we burst?") == 1
    store.close()


def test_eight_processes_on_every_master_of_a_cluster(redis_cluster):
    """Three agents, one per master of the cluster (each agent's slot owner computed, not
    assumed), driven by eight processes at once: each agent keeps its own budget."""
    redis_cluster.flush()
    by_master: dict[int, str] = {}
    for i in range(100):
        agent = f"agent-{i}"
        by_master.setdefault(redis_cluster.owner(f"talos:{{{agent}}}:ids").port, agent)
    assert len(by_master) == 3, by_master
    agents = tuple(by_master.values())
    masters = {redis_cluster.owner(f"talos:{{{a}}}:bucket").port for a in agents}
    assert masters == {m.port for m in redis_cluster.masters()}
    url = redis_cluster.url
    open_store(url).close()
    outcomes = run_processes(worker, url, agents, 150)
    check_one_budget_per_agent(url, outcomes, agents, 150)
    for master in redis_cluster.masters():  # each master holds exactly its agent's keys
        keys = master.client().keys("talos:{*")
        held = {k[len("talos:{") :].partition("}")[0] for k in keys}
        assert held == {by_master[master.port]}, (master.port, held)


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
