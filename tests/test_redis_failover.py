"""SIGKILL the primary that holds an agent's keys, in a Redis Cluster with a replica per master
and under Sentinel: while no primary serves them the queue fails closed (a StoreError with a
fault reason, nothing granted), the same open store serves again once the replica is promoted,
and what was acknowledged with `wait=1` before the kill is still there: the budget is never
granted twice for one window."""

from __future__ import annotations

import signal
import time

import pytest

from talos_ls.gates.question_queue import QuestionQueue
from talos_ls.memory.facts import FactStore
from talos_ls.store import StoreError, faults, open_store

from .conftest import confirmation
from .redis_server import ClusterServers, SentinelServers

pytestmark = pytest.mark.slow
K = 5  # the question queue's default budget window
FAULTS = (faults.UNREACHABLE, faults.SLOW, faults.READ_ONLY)


def ride_out_failover(store, qq: QuestionQueue, agent: str, seconds: float = 30.0) -> list[str]:
    """Ask for a question (turn 2: inside the window of the delivery at 0) until the store
    answers again; the fault reasons seen meanwhile. Every ask must be refused."""
    reasons: list[str] = []
    deadline = time.monotonic() + seconds
    while True:
        assert qq.next_question(agent, 2) is None  # fails closed, or the budget is closed
        try:
            store.qq_last_delivery(agent)
            return reasons
        except StoreError as exc:
            reasons.append(exc.reason)
        assert time.monotonic() < deadline, f"no primary after {seconds} s: {reasons[-3:]}"
        time.sleep(0.05)


def acknowledged_before_the_kill(qq: QuestionQueue, facts: FactStore, agent: str):
    """A question delivered at turn 0 (the budget granted) and another answered (its evidence
    applied), each acknowledged by a replica (wait=1)."""
    key = facts.add(agent, "deploys go through staging")
    answered = confirmation(qq, key, turn=0, agent=agent, text="Is staging still first?")
    assert qq.next_question(agent, 0).candidate_id == answered.candidate_id
    assert qq.record_answer(answered, "yes", 0).applied
    pending = confirmation(qq, "k-other", turn=0, agent=agent, text="Is the lint step needed?")
    assert qq.next_question(agent, 0) is None  # one delivery per window, even within a turn
    return key, answered, pending


def replica_back(server, primary_port: int, *, tell: bool = False) -> None:
    """Restart the killed server (its port, its folder): it comes back as the new primary's
    replica, so wait=1 can be met again. Until then every durable step fails closed. A cluster
    node knows its new place from its nodes.conf; Sentinel would tell the old primary at its
    next check (up to 10 s): `tell` does it now, as an operator would."""
    server.start()
    if tell:
        server.client().replicaof("127.0.0.1", primary_port)
    deadline = time.monotonic() + 30
    while True:
        info = server.client().info("replication")
        if info.get("master_port") == primary_port and info.get("master_link_status") == "up":
            return
        assert time.monotonic() < deadline, info
        time.sleep(0.05)


def check_after(qq: QuestionQueue, facts: FactStore, agent: str, key, answered, pending) -> None:
    assert qq.get(answered.candidate_id).status == "answered"
    assert facts.get(key).evidence_count >= 1  # the answer's evidence survived
    assert qq.store.qq_last_delivery(agent) == 0  # the grant survived: the window still closed
    for turn in range(1, K):
        assert qq.next_question(agent, turn) is None, f"budget granted twice (turn {turn})"
    got = qq.next_question(agent, K)  # the next window opens, once
    assert got is not None and got.candidate_id == pending.candidate_id
    assert qq.next_question(agent, K) is None


def acknowledged_on(url: str, agent: str):
    """`acknowledged_before_the_kill` through a store of its own whose acknowledgment window is
    generous (on a busy machine a replica can lag past the short one the failover is watched
    with): what it wrote was acknowledged, which is what the test is about."""
    patient = open_store(url + "?timeout=10&wait=1")
    try:
        return acknowledged_before_the_kill(QuestionQueue(patient), FactStore(patient), agent)
    finally:
        patient.close()


def test_cluster_master_killed(tmp_path):
    cluster = ClusterServers(tmp_path, replicas=1, node_timeout_ms=1000)
    store = open_store(cluster.url + "?timeout=0.5&wait=1")
    try:
        qq, facts = QuestionQueue(store), FactStore(store)
        agent = "/home/dana/proj"
        victim = cluster.owner(f"talos:{{{agent}}}:ids")
        other = next(
            f"agent-{i}"
            for i in range(100)
            if cluster.owner(f"talos:{{agent-{i}}}:ids") is not victim
        )
        acknowledged = acknowledged_on(cluster.url, agent)
        confirmation(qq, "k-elsewhere", turn=0, agent=other)

        victim.kill()  # SIGKILL: no shutdown, no hand-over
        started = time.monotonic()
        with pytest.raises(StoreError) as err:
            store.qq_select(
                agent,
                2,
                budget_turns=K,
                cooldown_turns=3,
                recent_use_turns=10,
                signals=["gate_refusal"],
                cues=None,
                limit=4,
                checked_kinds=[],
            )
        assert err.value.reason in FAULTS
        reasons = ride_out_failover(store, qq, agent)
        took = time.monotonic() - started
        assert all(r in FAULTS for r in reasons), reasons
        assert cluster.owner(f"talos:{{{agent}}}:ids") is not victim  # the replica took over
        # An agent on another master was served throughout, and after.
        assert qq.next_question(other, 0) is not None
        # The promoted primary has no replica yet: a durable step fails closed (an empty one,
        # here: a refused grant that was written would still close its window).
        with pytest.raises(StoreError, match="not acknowledged by 1 replica"):
            store.qq_deliver(agent, K, K, [])
        replica_back(victim, cluster.owner(f"talos:{{{agent}}}:ids").port)
        check_after(qq, facts, agent, *acknowledged)
        assert took < 120, took  # a store that never found the new primary, not a slow one
    finally:
        store.close()
        cluster.stop()


def test_sentinel_primary_killed(tmp_path):
    servers = SentinelServers(tmp_path, down_after_ms=1000)
    store = open_store(servers.url + "?timeout=0.5&wait=1")
    try:
        qq, facts = QuestionQueue(store), FactStore(store)
        agent = "a1"
        acknowledged = acknowledged_on(servers.url, agent)
        first = servers.primary()
        replica = next(s for s in servers.servers if s is not first)

        # A replica that does not acknowledge: the grant is refused (fails closed), not relied
        # on. Another agent, so what is checked below counts only what was acknowledged.
        cand = confirmation(qq, "k-a2", turn=0, agent="a2")
        replica.proc.send_signal(signal.SIGSTOP)
        try:
            assert qq.next_question("a2", 0) is None
            with pytest.raises(StoreError, match="not acknowledged by 1 replica"):
                store.qq_deliver("a2", 0, K, [cand.candidate_id])
        finally:
            replica.proc.send_signal(signal.SIGCONT)

        first.kill()
        started = time.monotonic()
        with pytest.raises(StoreError) as err:
            store.qq_last_delivery(agent)
        assert err.value.reason in FAULTS
        reasons = ride_out_failover(store, qq, agent)
        assert all(r in FAULTS for r in reasons), reasons
        assert servers.primary() is replica  # the store followed the promoted replica
        # The promoted primary has no replica yet: a durable step fails closed (an empty one,
        # here: a refused grant that was written would still close its window).
        with pytest.raises(StoreError, match="not acknowledged by 1 replica"):
            store.qq_deliver(agent, K, K, [])
        replica_back(first, replica.port, tell=True)
        check_after(qq, facts, agent, *acknowledged)
        assert time.monotonic() - started < 120  # a store that never followed, not a slow one
    finally:
        store.close()
        servers.stop()
