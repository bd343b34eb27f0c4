"""Storage failures: every public queue call returns its fail-closed value and none raises;
FactStore reports failures and never loses a fact it acknowledged.

The faults are real SQLite conditions: a closed handle, another connection holding the write
lock, a read-only open, a full database (a tiny max_page_count), and triggers that abort a step
half-way."""

from __future__ import annotations

import sqlite3
from types import SimpleNamespace

import pytest

from talos_ls.gates.question_queue import AnswerResult, QuestionQueue
from talos_ls.memory.facts import FactStore
from talos_ls.store import StoreError, open_store

from .conftest import disjunction


@pytest.fixture
def db(tmp_path):
    return tmp_path / "t.db"


def seeded(url):
    """A store with one delivered question (so answers, cooling and expiry have work to do)."""
    store = open_store(url)
    qq = QuestionQueue(store)
    cand, a, _b = disjunction(qq, qq.facts, turn=0)
    qq.propose(
        "a1",
        "Which parser?",
        "referent",
        "t",
        ["r#1"],
        "evidence_gap",
        0,
        options=[{"label": "src"}, {"label": "tools"}],
    )
    assert qq.next_question("a1", 0) is not None
    answered = qq.propose(
        "a1", "Old one?", "referent", "t", ["old"], "evidence_gap", 0, options=[{"label": "x"}]
    )
    qq.record_answer(answered, "x", 0)
    return store, qq, cand, a


GATE = {"gate": {"applied": True, "gated": True, "mode": "refuse", "refused_keys": ["fact:z"]}}
RECORD = SimpleNamespace(
    agent_id="a1",
    key="res:1",
    references_json='[{"surface": "the parser", "start": 4, "end": 14, "status": "evidence_gap",'
    ' "candidates": ["src/parser.py", "tools/parser.py"], "question": "Which parser?"}]',
)


def assert_every_call_fails_closed(qq: QuestionQueue, cand, key):
    assert qq.propose("a1", "Brand new?", "referent", "t", ["new"], "evidence_gap", 30) is None
    assert qq.note_use("a1", [key, "r#1"], 30) == 0
    assert qq.next_question("a1", 30) is None
    res = qq.record_answer(cand, "morning", 30)
    assert isinstance(res, AnswerResult) and not res.applied and res.reason == "error"
    assert qq.expire_stale("a1", 30) == 0
    assert qq.prune("a1", 10_000) == 0
    assert qq.propose_from_gate("a1", GATE, 30, "deploy") is None
    assert qq.propose_from_resolution(RECORD, 30) == 0


def test_closed_store(db):
    store, qq, cand, key = seeded("sqlite:///" + str(db))
    store.close()
    assert_every_call_fails_closed(qq, cand, key)
    assert qq.get(cand.candidate_id) is None and qq.candidates("a1") == []
    with pytest.raises(StoreError, match="closed"):
        qq.facts.get(key)


def test_locked_database(db):
    store, _, _, _ = seeded("sqlite:///" + str(db))
    store.close()
    locked = open_store("sqlite:///" + str(db) + "?timeout=0.05")
    qq = QuestionQueue(locked)
    cand = qq.candidates("a1")[0]
    key = cand.target_keys[0]
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another daemon, mid-write
    holder.execute("UPDATE facts SET statement = statement")
    try:
        assert_every_call_fails_closed(qq, cand, key)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    # Once the lock is released the same handle works again.
    assert qq.propose("a1", "Brand new?", "referent", "t", ["new"], "evidence_gap", 30)
    locked.close()


def test_write_lock_held_drops_proposals_and_writes_nothing(db):
    store = open_store("sqlite:///" + str(db) + "?timeout=0.05")
    qq = QuestionQueue(store)
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process's atomic step, stuck
    try:
        assert qq.propose("a1", "Tabs?", "referent", "t", ["k"], "evidence_gap", 0) is None
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert qq.candidates("a1") == []
    assert qq.propose("a1", "Tabs?", "referent", "t", ["k"], "evidence_gap", 0) is not None
    store.close()


def test_read_only_database(db):
    store, _, _, _ = seeded("sqlite:///" + str(db))
    store.close()
    ro = open_store("sqlite:///" + str(db) + "?mode=ro")
    qq = QuestionQueue(ro)
    cand = next(c for c in qq.candidates("a1") if c.status == "delivered")
    assert_every_call_fails_closed(qq, cand, cand.target_keys[0])
    with pytest.raises(StoreError, match="readonly"):
        qq.facts.add("a1", "x")
    ro.close()


def test_disk_full(db):
    store, qq, cand, key = seeded("sqlite:///" + str(db))
    facts = qq.facts
    conn = store._conn
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages}")
    acknowledged, refused = [], 0
    for i in range(400):  # fill what room is left
        try:
            acknowledged.append(facts.add("a1", f"fact number {i} " + "x" * 200))
        except StoreError as exc:
            assert "full" in str(exc)
            refused += 1
    assert refused > 0
    assert (
        qq.propose(
            "a1",
            "A long new question? " + "y" * 3000,
            "referent",
            "t",
            [f"k{i}" for i in range(200)],
            "evidence_gap",
            1,
        )
        is None
    )
    for call in (
        lambda: qq.note_use("a1", [key], 1),
        lambda: qq.next_question("a1", 5),
        lambda: qq.record_answer(cand, "morning", 1),
        lambda: qq.expire_stale("a1", 40),
        lambda: qq.prune("a1", 10_000),
    ):
        call()  # may succeed in place or fail closed; must not raise
    store.close()
    reopened = FactStore(open_store("sqlite:///" + str(db)))
    assert all(reopened.get(k) is not None for k in acknowledged)
    reopened.store.close()


def test_failure_after_the_claim_is_apply_failed(db):
    store, qq, cand, key = seeded("sqlite:///" + str(db))
    before = qq.facts.get(key)
    store._conn.execute(
        "CREATE TRIGGER boom BEFORE UPDATE ON facts BEGIN SELECT RAISE(ABORT, 'disk I/O'); END"
    )
    res = qq.record_answer(cand, "morning", 1)
    assert (res.applied, res.reason, res.option_index) == (False, "apply_failed", 0)
    assert qq.get(cand.candidate_id).status == "answered"
    assert qq.facts.get(key) == before  # no evidence, and never double-counted:
    store._conn.execute("DROP TRIGGER boom")
    assert qq.record_answer(cand, "morning", 2).reason == "not_open"
    assert qq.facts.get(key) == before
    store.close()


def test_failing_delivery_step_spends_nothing(db):
    store = open_store("sqlite:///" + str(db))
    qq = QuestionQueue(store)
    cand = qq.propose("a1", "Which parser?", "referent", "t", ["k"], "evidence_gap", 0)
    store._conn.execute(
        "CREATE TRIGGER boom BEFORE INSERT ON question_budget "
        "BEGIN SELECT RAISE(ABORT, 'disk I/O'); END"
    )
    assert qq.next_question("a1", 0) is None
    stored = qq.get(cand.candidate_id)
    assert (stored.status, stored.ask_count, stored.delivered_turn) == ("pending", 0, None)
    assert store.qq_agents() == {"a1": None}
    store._conn.execute("DROP TRIGGER boom")
    assert qq.next_question("a1", 0).candidate_id == cand.candidate_id
    store.close()


def test_rules_sync_interrupted_by_a_full_disk_loses_nothing_acknowledged(db, tmp_path):
    from talos_ls.memory.rules import RulesFiles

    store = open_store("sqlite:///" + str(db))
    facts = FactStore(store)
    rules = "\n".join(f"- rule number {i}: " + "word " * 60 for i in range(200))
    (tmp_path / "AGENTS.md").write_text(rules)
    conn = store._conn
    conn.execute(f"PRAGMA max_page_count = {conn.execute('PRAGMA page_count').fetchone()[0] + 3}")
    sync = RulesFiles(facts)
    with pytest.raises(StoreError, match="full"):
        sync.sync("a1", tmp_path)
    stored_before = {f.key for f in facts.list("a1")}
    assert 0 < len(stored_before) < 200
    conn.execute("PRAGMA max_page_count = 1000000")
    sync.sync("a1", tmp_path)  # the failed sync is retried in full
    held = facts.list("a1", include_closed=False)
    assert stored_before <= {f.key for f in held}  # nothing acknowledged was lost
    assert sorted(f.statement.split(":")[0] for f in held) == sorted(
        f"rule number {i}" for i in range(200)
    )  # and nothing is there twice
    store.close()


def test_disjunction_producer_fails_closed(db):
    store = open_store("sqlite:///" + str(db))
    qq = QuestionQueue(store)
    store.close()
    assert qq.propose_from_disjunctions("a1", 0) == 0
