"""Shared fixtures. Contract fixtures are parametrized over every backend: a behaviour test
written against `store` / `qq` / `facts` runs on each one."""

from __future__ import annotations

import contextlib
import os

import pytest
import redis

from talos_ls.gates.question_queue import QuestionQueue
from talos_ls.memory.facts import FactStore
from talos_ls.store import open_store

# "redis-cluster": a real three-master Redis Cluster (tests/redis_server.py); "valkey": the
# same store on a real valkey-server.
BACKENDS = ["sqlite", "redis", "redis-cluster", "valkey"]


def pytest_addoption(parser) -> None:
    parser.addoption(
        "--full",
        action="store_true",
        help="also run the full tier (tests marked `full`: a soak, the real VS Code "
        "workbench, 10,000-message floods, the TypeScript ACP client, the reference MCP servers, "
        "the real processes' tests on the Redis family); "
        "CI always does",
    )


def pytest_collection_modifyitems(config, items) -> None:
    """Without --full, the full tier is deselected (and counted as such in the summary)."""
    if config.getoption("--full"):
        return
    full = [item for item in items if item.get_closest_marker("full")]
    if full:
        config.hook.pytest_deselected(items=full)
        items[:] = [item for item in items if not item.get_closest_marker("full")]


def pytest_xdist_auto_num_workers(config) -> int:
    """`-n auto` (the default, pyproject.toml): two workers a core, from 4 to 8. Most tests
    wait on processes and sockets (a server starting, a scripted model streaming), not on the
    CPU, so a core runs more than one; each worker starts its own Redis servers."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(4, min(8, 2 * (cores or 1)))


@pytest.fixture(autouse=True)
def _queue_enabled(monkeypatch):
    monkeypatch.delenv("TALOS_QUESTION_QUEUE_DISABLE", raising=False)
    monkeypatch.delenv("TALOS_STORE_URL", raising=False)


@pytest.fixture(scope="session")
def _redis_servers(tmp_path_factory):
    """This worker's Redis-protocol servers, started when a test first needs one: a Redis, a
    Valkey, a three-master Redis Cluster. Tests reach them through the fixtures below, which
    leave each one empty for the next test."""
    from .redis_server import ClusterServers, RedisServer, find_valkey

    started: dict[str, object] = {}

    def get(kind: str):
        if kind not in started:
            where = tmp_path_factory.mktemp(kind)
            started[kind] = (
                ClusterServers(where)
                if kind == "redis-cluster"
                else RedisServer(where, binary=find_valkey() if kind == "valkey" else None)
            )
        return started[kind]

    yield get
    for server in started.values():
        server.stop()


def _shared(get, kind: str):
    """The worker's server of `kind`, flushed after the test: whatever a test wrote there (or a
    daemon it started, before it was stopped) is gone for the next one."""
    server = get(kind)
    yield server
    with contextlib.suppress(redis.RedisError):  # a test that broke the server says so itself
        server.flush()


@pytest.fixture
def redis_server(_redis_servers):
    yield from _shared(_redis_servers, "redis")


@pytest.fixture
def valkey_server(_redis_servers):
    yield from _shared(_redis_servers, "valkey")


@pytest.fixture
def redis_cluster(_redis_servers):
    yield from _shared(_redis_servers, "redis-cluster")


@pytest.fixture
def server():
    """A local HTTP server speaking the OpenAI streaming API, scripted by the test."""
    from talos_ls.demo.scripted_model import ScriptedModelServer

    s = ScriptedModelServer()
    yield s
    s.close()


# Through real processes (killed and restarted servers, two daemons on one store, a task's
# questions end to end), the Redis family is the full tier's: the contract suites run on every
# backend in-process on every run, and above the store the processes run the same code. CI
# runs them all.
def process_backends() -> list:
    """BACKENDS for a test of real processes: SQLite always, the others with --full."""
    return [b if b == "sqlite" else pytest.param(b, marks=pytest.mark.full) for b in BACKENDS]


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


@pytest.fixture
def store_url(backend, tmp_path, request) -> str:
    """A fresh, empty store of the backend: a new SQLite file, or a flushed Redis (one server,
    or every master of a cluster) or Valkey."""
    if backend == "sqlite":
        yield "sqlite:///" + str(tmp_path / "talos.db")
        return
    server = redis_for(backend, request)
    server.flush()  # (flushed after each test too: this guards against a crashed one)
    yield server.url


def redis_for(backend: str, request):
    """The running server (or cluster) of a Redis-protocol backend."""
    fixture = {"redis-cluster": "redis_cluster", "valkey": "valkey_server"}
    return request.getfixturevalue(fixture.get(backend, "redis_server"))


@pytest.fixture
def store(store_url):
    s = open_store(store_url)
    yield s
    s.close()


@pytest.fixture
def facts(store) -> FactStore:
    return FactStore(store)


@pytest.fixture
def qq(store, facts) -> QuestionQueue:
    return QuestionQueue(store, facts=facts)


def disjunction(qq: QuestionQueue, facts: FactStore, turn: int = 0, agent: str = "a1", **kw):
    """Two conflicting facts and the disjunction question about them."""
    a = facts.add(agent, kw.pop("a_text", "Dana prefers morning meetings"))
    b = facts.add(agent, kw.pop("b_text", "Dana prefers afternoon meetings"))
    cand = qq.propose(
        agent_id=agent,
        question_text=kw.pop("text", "Does Dana prefer morning or afternoon meetings?"),
        kind="disjunction",
        source_module="reconciliation",
        target_keys=[a, b],
        ambiguity_signal="disjunction",
        turn=turn,
        options=[
            {"label": "morning", "acted": [a], "contradicted": [b]},
            {"label": "afternoon", "acted": [b], "contradicted": [a]},
        ],
        **kw,
    )
    assert cand is not None
    return cand, a, b


def confirmation(qq: QuestionQueue, key: str, turn: int = 0, agent: str = "a1", text=None):
    cand = qq.propose(
        agent_id=agent,
        question_text=text or f"Is {key} still accurate for the deploy?",
        kind="confirmation",
        source_module="test",
        target_keys=[key],
        ambiguity_signal="gate_refusal",
        turn=turn,
        options=[{"label": "yes", "acted": [key]}, {"label": "no", "contradicted": [key]}],
    )
    assert cand is not None
    return cand
