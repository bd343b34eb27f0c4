"""What only Redis Cluster and Sentinel add to the Redis backend: their URLs, the one-slot rule
for scripts, and listing agents from the index instead of scanning keys."""

from __future__ import annotations

import pytest
import redis

from talos_ls.gates.question_queue import QuestionQueue
from talos_ls.memory.facts import FactStore
from talos_ls.store import StoreError, open_store
from talos_ls.store.redis_connect import CLUSTER, SENTINEL, parse


@pytest.mark.parametrize(
    ("url", "fault"),
    [
        ("redis+cluster://", "names no host"),
        ("redis+cluster://:7000", "names no host"),
        ("redis+cluster://127.0.0.1:7000,", "names no host"),
        ("redis+cluster://127.0.0.1:port", "no valid port"),
        ("redis+cluster://127.0.0.1:70000", "no valid port"),
        ("redis+cluster://127.0.0.1:7000/3", "only database 0"),
        ("redis+cluster://127.0.0.1:7000?db=2", "unknown parameter db='2'"),
        ("redis+cluster://127.0.0.1:7000?wait=many", "wait must be a number of replicas"),
        ("redis+cluster://127.0.0.1:7000?timeout=-1", "timeout must be"),
        ("redis+sentinel://127.0.0.1:26379", "names no service"),
        ("redis+sentinel://127.0.0.1:26379/a/b", "names no service"),
        ("redis+sentinel://127.0.0.1:26379/talos?db=x", "db must be a number"),
        ("redis+sentinel://127.0.0.1:26379/talos?colour=blue", "unknown parameter colour"),
    ],
)
def test_a_malformed_url_names_what_is_wrong(url, fault):
    with pytest.raises(StoreError, match=fault) as err:
        open_store(url)
    assert "cannot reach" not in str(err.value)  # refused before any connection


def test_a_password_in_a_cluster_or_sentinel_url_is_never_shown():
    for url in (
        "redis+cluster://talos:hunter2@127.0.0.1:bad",
        "redis+sentinel://talos:hunter2@127.0.0.1:26379",
    ):
        with pytest.raises(StoreError) as err:
            open_store(url)
        assert "hunter2" not in str(err.value) and "talos:***@" in str(err.value)


def test_urls_are_read_as_written():
    t = parse("shown", "rediss+cluster://u:p%40ss@h1:7000,[::1]:7001,h3?timeout=0.5&wait=1")
    assert (t.topology, t.tls, t.timeout, t.wait, t.wait_ms) == (CLUSTER, True, 0.5, 1, 250)
    assert t.nodes == [("h1", 7000), ("::1", 7001), ("h3", 6379)]
    assert (t.username, t.password) == ("u", "p@ss")
    t = parse("shown", "redis+sentinel://s1,s2:26380/talos?db=3")
    assert (t.topology, t.service, t.db, t.nodes) == (
        SENTINEL,
        "talos",
        3,
        [("s1", 26379), ("s2", 26380)],
    )


def test_unreachable_cluster_is_one_clear_error():
    from .redis_server import free_port

    with pytest.raises(StoreError, match=r"cannot reach store redis\+cluster://127.0.0.1"):
        open_store(f"redis+cluster://127.0.0.1:{free_port()}?timeout=0.3")


def test_a_script_whose_keys_span_slots_is_refused_before_it_runs(redis_cluster):
    """An empty agent id gives the prefix `talos:{}:`, an empty hash tag: every key would hash
    whole, each to its own slot. The store computes the slots and refuses; nothing is sent."""
    redis_cluster.flush()
    store = open_store(redis_cluster.url)
    try:
        sent: list[str] = []
        original = store._client.execute_command
        store._client.execute_command = lambda *a, **k: sent.append(a[0]) or original(*a, **k)
        with pytest.raises(StoreError, match=r"would touch keys of hash slots .* one slot only"):
            store.qq_sweep("", 1, cooldown_turns=3)
        assert "EVALSHA" not in sent
        assert store.qq_sweep("a1", 1, cooldown_turns=3) == 0  # a tagged agent runs
    finally:
        store.close()


def test_agents_are_listed_from_the_index_never_by_scanning(redis_cluster):
    redis_cluster.flush()
    store = open_store(redis_cluster.url)
    try:
        qq, facts = QuestionQueue(store), FactStore(store)
        agents = [f"agent-{i}" for i in range(12)]  # spread over the three masters
        assert len({redis_cluster.owner(f"talos:{{{a}}}:ids").port for a in agents}) == 3
        for i, agent in enumerate(agents):
            if i % 3:
                qq.propose(agent, "Which parser?", "referent", "t", ["k"], "evidence_gap", 0)
            if i % 2:
                facts.add(agent, f"fact of {agent}")
        qq.next_question("agent-1", 4)

        def no_scan(*args, **kwargs):
            raise AssertionError("a cluster store scanned")

        store._client.scan_iter = no_scan
        store._client.scan = no_scan
        listed = store.qq_agents()
        assert listed == {a: (4 if a == "agent-1" else None) for i, a in enumerate(agents) if i % 3}
        assert {c["agent_id"] for c in store.qq_list()} == set(listed)
        assert {f["agent_id"] for f in store.fact_list()} == {
            a for i, a in enumerate(agents) if i % 2
        }
    finally:
        store.close()


def test_a_single_server_store_from_before_the_index_still_lists_its_agents(redis_server):
    redis_server.flush()
    store = open_store(redis_server.url)
    qq = QuestionQueue(store)
    for agent in ("old-1", "old-2"):
        qq.propose(agent, "Which parser?", "referent", "t", ["k"], "evidence_gap", 0)
    FactStore(store).add("old-3", "a fact only")
    store.close()
    admin = redis.Redis(port=redis_server.port, decode_responses=True)
    admin.delete("talos:agents", "talos:agents:indexed")  # as an older Talos left it

    store = open_store(redis_server.url)
    try:
        assert list(store.qq_agents()) == ["old-1", "old-2"]
        assert [f["agent_id"] for f in store.fact_list()] == ["old-3"]
        assert admin.smembers("talos:agents") == {"old-1", "old-2", "old-3"}
        assert admin.get("talos:agents:indexed") == "1"  # scanned once, not again
        admin.srem("talos:agents", "old-2")
        assert list(store.qq_agents()) == ["old-1"]
    finally:
        store.close()
