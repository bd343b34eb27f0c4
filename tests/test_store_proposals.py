"""Proposed edits in the store: every backend keeps the same records and makes a status step
(apply, reject, undo) one compare-and-set, so no proposal is applied twice, across processes."""

from __future__ import annotations

import sqlite3
import threading

import pytest
import redis

from talos_ls.store import StoreError, open_store
from talos_ls.store.base import PROPOSAL_FIELDS, SETTLED_PROPOSAL_STATUSES

BASE = "first line\r\nsecond — ünïcode\r\nthird 🐍 astral 𝔘\n"
NEW = "first line\r\nsecond — changed\r\nthird 🐍 astral 𝔘\nfourth\r"


def proposal(pid: str = "p1", **over) -> dict:
    return _proposal(pid, **over)


def _proposal(pid: str = "p1", **over) -> dict:
    row = {
        "id": pid,
        "agent_id": "/home/dana/proj",
        "task_id": "t1",
        "path": "src/app.py",
        "base_hash": "b" * 64,
        "base_text": BASE,
        "new_text": NEW,
        "version": 7,
        "hunks": [
            {
                "index": 0,
                "base_start": 1,
                "base_end": 2,
                "old_lines": ["second — ünïcode\r\n"],
                "new_lines": ["second — changed\r\n"],
            },
            {
                "index": 1,
                "base_start": 3,
                "base_end": 3,
                "old_lines": [],
                "new_lines": ["fourth\r"],
            },
        ],
        "status": "pending",
        "applied_hunks": [],
        "applied_hash": None,
        "undo_text": None,
        "created_at": 1000.25,
        "updated_at": 1000.25,
    }
    row.update(over)
    return row


# ------------------------------------------------------------------ put / get
def test_put_get_round_trip(store):
    row = proposal()
    store.proposal_put(row)
    got = store.proposal_get("p1")
    assert got == row
    assert list(got) == list(PROPOSAL_FIELDS)
    assert isinstance(got["version"], int) and isinstance(got["created_at"], float)
    assert got["base_text"].count("\r\n") == 2 and "𝔘" in got["new_text"]


def test_nones_round_trip(store):
    row = proposal(version=None, task_id=None, applied_hash=None, hunks=[], applied_hunks=[])
    store.proposal_put(row)
    assert store.proposal_get("p1") == row


def test_odd_texts_round_trip(store):
    texts = ["", "\x00nul\x00", "a\rb\r\nc\nd", "\u2028\u2029\x0c", "💩" * 1000, '"{}[]\\']
    for i, text in enumerate(texts):
        store.proposal_put(proposal(f"p{i}", base_text=text, new_text=text + "x"))
    for i, text in enumerate(texts):
        got = store.proposal_get(f"p{i}")
        assert (got["base_text"], got["new_text"]) == (text, text + "x")


def test_integer_times_come_back_as_floats(store):
    store.proposal_put(proposal(created_at=5, updated_at=6))
    got = store.proposal_get("p1")
    assert (got["created_at"], got["updated_at"]) == (5.0, 6.0)
    assert isinstance(got["created_at"], float)


def test_put_replaces(store):
    store.proposal_put(proposal())
    store.proposal_put(proposal(status="stale", version=None, updated_at=2000.0))
    got = store.proposal_get("p1")
    assert (got["status"], got["version"], got["updated_at"]) == ("stale", None, 2000.0)
    assert [r["id"] for r in store.proposal_list("/home/dana/proj")] == ["p1"]


def test_unknown_id_is_none(store):
    assert store.proposal_get("nope") is None
    assert store.proposal_claim("nope", ["pending"], {"status": "applied"}) is None
    assert store.proposal_list("nobody") == []


@pytest.mark.parametrize(
    "change, words",
    [
        ({"status": None}, "'status'"),
        ({"status": "done"}, "'status' must be one of"),
        ({"version": "7"}, "'version' must be an int or None"),
        ({"version": True}, "'version'"),
        ({"hunks": "[]"}, "'hunks' must be a list of objects"),
        ({"hunks": [1]}, "'hunks'"),
        ({"applied_hunks": ["0"]}, "'applied_hunks' must be a list of ints"),
        ({"created_at": "now"}, "'created_at'"),
        ({"created_at": float("nan")}, "'created_at'"),
        ({"id": ""}, "'id' must be a non-empty string"),
        ({"agent_id": None}, "'agent_id'"),
        ({"base_text": None}, "'base_text' must be a string"),
        ({"applied_hash": 3}, "'applied_hash'"),
        ({"colour": "red"}, "unknown proposal field(s): colour"),
    ],
)
def test_bad_rows_are_refused_naming_the_field(store, change, words):
    with pytest.raises(ValueError) as err:
        store.proposal_put(proposal(**change))
    assert words in str(err.value)
    assert store.proposal_get("p1") is None


def test_a_missing_field_is_named(store):
    row = proposal()
    del row["base_hash"], row["updated_at"]
    with pytest.raises(ValueError, match=r"missing field.*base_hash, updated_at"):
        store.proposal_put(row)


def test_an_id_of_another_agent_is_refused(store):
    store.proposal_put(proposal())
    with pytest.raises(ValueError, match="another agent"):
        store.proposal_put(proposal(agent_id="other"))
    assert store.proposal_get("p1")["agent_id"] == "/home/dana/proj"
    assert store.proposal_list("other") == []


def test_a_closed_store_says_so(store_url):
    s = open_store(store_url)
    s.close()
    with pytest.raises(StoreError, match="closed"):
        s.proposal_get("p1")


# ----------------------------------------------------------------------- list
def test_list_by_agent_path_and_status_oldest_first(store):
    store.proposal_put(proposal("pc", created_at=30.0))
    store.proposal_put(proposal("pb", created_at=10.0, path="other.py"))
    store.proposal_put(proposal("pa2", created_at=20.0, status="applied"))
    store.proposal_put(proposal("pa1", created_at=20.0, status="rejected"))  # same time: by id
    store.proposal_put(proposal("px", agent_id="someone else", created_at=1.0))
    ids = lambda rows: [r["id"] for r in rows]  # noqa: E731
    agent = "/home/dana/proj"
    assert ids(store.proposal_list(agent)) == ["pb", "pa1", "pa2", "pc"]
    assert ids(store.proposal_list(agent, path="src/app.py")) == ["pa1", "pa2", "pc"]
    assert ids(store.proposal_list(agent, path="nope.py")) == []
    assert ids(store.proposal_list(agent, statuses=["pending"])) == ["pb", "pc"]
    assert ids(store.proposal_list(agent, statuses=("applied", "rejected"))) == ["pa1", "pa2"]
    assert ids(store.proposal_list(agent, statuses=[])) == []
    assert ids(store.proposal_list(agent, "src/app.py", ["pending"])) == ["pc"]
    assert ids(store.proposal_list("someone else")) == ["px"]
    assert store.proposal_list(agent)[0] == proposal("pb", created_at=10.0, path="other.py")


# ---------------------------------------------------------------------- claim
def test_claim_succeeds_once(store):
    store.proposal_put(proposal())
    updates = {
        "status": "applied",
        "applied_hunks": [0, 1],
        "applied_hash": "h" * 64,
        "updated_at": 1001.5,
    }
    got = store.proposal_claim("p1", ["pending"], updates)
    assert got == proposal(**updates)
    assert store.proposal_get("p1") == got
    assert store.proposal_claim("p1", ["pending"], updates) is None
    assert store.proposal_claim("p1", ("pending", "stale"), {"status": "rejected"}) is None
    assert store.proposal_get("p1") == got


def test_claim_from_a_status_not_listed_is_none_and_writes_nothing(store):
    store.proposal_put(proposal(status="stale"))
    assert store.proposal_claim("p1", ["pending"], {"status": "applied"}) is None
    assert store.proposal_claim("p1", [], {"status": "applied"}) is None
    assert store.proposal_get("p1") == proposal(status="stale")
    got = store.proposal_claim("p1", ["pending", "stale"], {"status": "rejected"})
    assert got is not None and got["status"] == "rejected"


def test_claim_clears_and_sets_any_field(store):
    store.proposal_put(proposal(status="applied", applied_hash="h", applied_hunks=[1]))
    got = store.proposal_claim(
        "p1",
        ["applied"],
        {
            "status": "undone",
            "applied_hash": None,
            "version": None,
            "task_id": None,
            "hunks": [{"index": 0}],
            "created_at": 1.0,
        },
    )
    expected = proposal(
        status="undone",
        applied_hash=None,
        applied_hunks=[1],
        version=None,
        task_id=None,
        hunks=[{"index": 0}],
        created_at=1.0,
    )
    assert got == expected == store.proposal_get("p1")
    # created_at moved: the order follows.
    store.proposal_put(proposal("p0", created_at=500.0))
    assert [r["id"] for r in store.proposal_list("/home/dana/proj")] == ["p1", "p0"]


def test_a_claim_with_no_updates_is_a_pure_test(store):
    store.proposal_put(proposal())
    assert store.proposal_claim("p1", ["pending"], {}) == proposal()
    assert store.proposal_claim("p1", ["applied"], {}) is None


@pytest.mark.parametrize(
    "from_statuses, updates, words",
    [
        (["pending"], {"id": "p2"}, "cannot change proposal field(s): id"),
        (["pending"], {"agent_id": "x"}, "agent_id"),
        (["pending"], {"status": "done"}, "'status'"),
        (["pending"], {"status": None}, "'status'"),
        (["pending"], {"colour": 1}, "unknown proposal field"),
        (["done"], {"status": "applied"}, "unknown proposal status"),
        ("pending", {"status": "applied"}, "not one string"),
    ],
)
def test_bad_claims_are_refused(store, from_statuses, updates, words):
    store.proposal_put(proposal())
    with pytest.raises(ValueError) as err:
        store.proposal_claim("p1", from_statuses, updates)
    assert words in str(err.value)
    assert store.proposal_get("p1") == proposal()


def test_two_connections_race_and_exactly_one_wins(store, store_url):
    other = open_store(store_url)
    try:
        for n in range(50):
            pid = f"race{n}"
            store.proposal_put(proposal(pid))
            barrier = threading.Barrier(4)
            wins: list[tuple[int, dict | None]] = []
            lock = threading.Lock()

            def claim(i: int, s, pid=pid, barrier=barrier, wins=wins, lock=lock) -> None:
                barrier.wait()
                got = s.proposal_claim(
                    pid, ["pending"], {"status": "applied", "applied_hash": f"by{i}"}
                )
                with lock:
                    wins.append((i, got))

            threads = [
                threading.Thread(target=claim, args=(i, (store, other)[i % 2])) for i in range(4)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            winners = [(i, got) for i, got in wins if got is not None]
            assert len(wins) == 4 and len(winners) == 1, wins
            i, got = winners[0]
            assert got["applied_hash"] == f"by{i}"
            assert store.proposal_get(pid) == other.proposal_get(pid) == got
    finally:
        other.close()


def test_a_second_daemon_sees_the_same_states(store, store_url):
    store.proposal_put(proposal())
    other = open_store(store_url)
    try:
        assert other.proposal_get("p1") == proposal()
        other.proposal_claim("p1", ["pending"], {"status": "rejected", "updated_at": 1002.0})
        assert store.proposal_list("/home/dana/proj", statuses=["rejected"])[0]["id"] == "p1"
    finally:
        other.close()


# ---------------------------------------------------------------------- prune
def test_prune_keeps_open_ones_and_the_newest_settled(store):
    """Of no task (a task's applied ones go together: the next test)."""
    agent = "/home/dana/proj"

    def proposal(pid, **over):
        return _proposal(pid, task_id=None, **over)

    store.proposal_put(proposal("pending-old", created_at=1.0, updated_at=1.0))
    store.proposal_put(
        proposal("partly-old", status="partly_applied", created_at=2.0, updated_at=2.0)
    )
    for i, status in enumerate(SETTLED_PROPOSAL_STATUSES * 2):  # every settled status, twice
        store.proposal_put(proposal(f"s{i}", status=status, updated_at=100.0 + i))
    store.proposal_put(proposal("tie-a", status="applied", updated_at=200.0))
    store.proposal_put(proposal("tie-b", status="rejected", updated_at=200.0))
    store.proposal_put(proposal("elsewhere", agent_id="other", status="applied"))
    assert store.proposal_prune(agent, 3) == 7
    left = {r["id"] for r in store.proposal_list(agent)}
    assert left == {"pending-old", "partly-old", "s7", "tie-a", "tie-b"}
    assert store.proposal_get("s0") is None
    assert store.proposal_prune(agent, 3) == 0
    assert store.proposal_prune(agent, 1) == 2  # ties by id: the larger id is the newer
    assert {r["id"] for r in store.proposal_list(agent)} == {"pending-old", "partly-old", "tie-b"}
    assert store.proposal_prune(agent, 0) == 1
    assert [r["id"] for r in store.proposal_list(agent)] == ["pending-old", "partly-old"]
    assert store.proposal_get("elsewhere") is not None


def test_prune_keeps_a_tasks_applied_proposals_together(store):
    """A rewind finds every proposal its task applied, or none: an applied one beyond the
    newest kept stays while its task has another proposal kept."""
    agent = "/home/dana/proj"
    store.proposal_put(proposal("t1-applied-old", status="applied", updated_at=1.0))
    store.proposal_put(proposal("t1-rejected-old", status="rejected", updated_at=2.0))
    store.proposal_put(proposal("t1-applied-new", status="applied", updated_at=50.0))
    store.proposal_put(proposal("t2-applied", task_id="t2", status="applied", updated_at=3.0))
    store.proposal_put(proposal("t2-undone", task_id="t2", status="undone", updated_at=4.0))
    store.proposal_put(proposal("none", task_id=None, status="applied", updated_at=5.0))
    store.proposal_put(proposal("t3-pending", task_id="t3", updated_at=0.5))
    store.proposal_put(proposal("t3-applied", task_id="t3", status="applied", updated_at=0.5))
    assert store.proposal_prune(agent, 1) == 4
    left = {r["id"] for r in store.proposal_list(agent)}
    assert left == {"t1-applied-old", "t1-applied-new", "t3-pending", "t3-applied"}
    assert store.proposal_prune(agent, 1) == 0
    store.proposal_claim("t1-applied-new", ["applied"], {"status": "undone", "updated_at": 60.0})
    store.proposal_claim("t3-pending", ["pending"], {"status": "rejected", "updated_at": 0.7})
    assert store.proposal_prune(agent, 0) == 4  # no proposal of a task kept: all of them go
    assert store.proposal_list(agent) == []


def test_a_tasks_proposals_are_found_by_it_from_another_connection(store, store_url):
    """What a task applied is listed with its task after the process that wrote it is gone."""
    store.proposal_put(proposal("a", task_id="t9", status="applied", undo_text="before\r\n"))
    store.proposal_put(proposal("b", task_id="t8"))
    store.close()
    other = open_store(store_url)
    try:
        rows = [r for r in other.proposal_list("/home/dana/proj") if r["task_id"] == "t9"]
        assert [(r["id"], r["status"], r["undo_text"]) for r in rows] == [
            ("a", "applied", "before\r\n")
        ]
    finally:
        other.close()


def test_prune_follows_status_changes(store):
    agent = "/home/dana/proj"
    store.proposal_put(proposal("a", status="applied", updated_at=10.0))
    store.proposal_put(proposal("b", updated_at=5.0))
    store.proposal_claim("b", ["pending"], {"status": "rejected", "updated_at": 20.0})
    store.proposal_claim("a", ["applied"], {"status": "pending"})  # back to pending: kept
    store.proposal_put(proposal("c", status="stale", updated_at=1.0))
    store.proposal_put(proposal("c", status="pending", updated_at=1.0))  # replaced: pending
    assert store.proposal_prune(agent, 0) == 1
    assert [r["id"] for r in store.proposal_list(agent)] == ["a", "c"]


def test_prune_refuses_a_negative_count(store):
    with pytest.raises(ValueError, match="keep_settled"):
        store.proposal_prune("a1", -1)


def test_a_pruned_id_can_be_made_again(store):
    store.proposal_put(proposal(status="rejected"))
    assert store.proposal_prune("/home/dana/proj", 0) == 1
    store.proposal_put(proposal(agent_id="other"))  # its locator left with it
    assert store.proposal_get("p1")["agent_id"] == "other"


# -------------------------------------------------------------- backend only
def test_sqlite_migrates_a_version_3_file_and_keeps_its_data(tmp_path):
    from talos_ls.store.sqlite import APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION

    path = tmp_path / "v3.db"
    conn = sqlite3.connect(path)
    for step in MIGRATIONS[:3]:  # the schema as released before proposals
        for statement in step:
            conn.execute(statement)
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute("PRAGMA user_version = 3")
    conn.execute(
        "INSERT INTO tasks VALUES ('t1', 'a1', 'done', 'Fix it', 1.0, 2.0, '{}', NULL, '[]')"
    )
    conn.commit()
    conn.close()
    store = open_store("sqlite:///" + str(path))
    try:
        assert store.task_get("t1")["title"] == "Fix it"
        store.proposal_put(proposal())
        assert store.proposal_get("p1") == proposal()
    finally:
        store.close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION >= 4
    conn.close()
    reopened = open_store("sqlite:///" + str(path))  # a restarted server sees the same
    try:
        assert reopened.proposal_list("/home/dana/proj") == [proposal()]
    finally:
        reopened.close()


def test_redis_proposal_keys_carry_the_agent_hash_tag(redis_server):
    redis_server.flush()
    store = open_store(redis_server.url)
    try:
        for agent in ("/home/dana/proj", "other"):
            store.proposal_put(proposal(f"p-{agent}", agent_id=agent))
            store.proposal_put(proposal(f"q-{agent}", agent_id=agent, status="applied"))
            store.proposal_claim(f"p-{agent}", ["pending"], {"status": "rejected"})
            store.proposal_prune(agent, 1)
    finally:
        store.close()
    keys = redis.Redis(port=redis_server.port, decode_responses=True).keys("*")
    locators = sorted(k for k in keys if k.startswith("talos:prop:{"))
    assert locators == ["talos:prop:{q-/home/dana/proj}", "talos:prop:{q-other}"]
    per_agent = [k for k in keys if k not in locators and k != "talos:schema"]
    assert per_agent and all(
        k.startswith(("talos:{/home/dana/proj}:", "talos:{other}:")) for k in per_agent
    )


def test_the_stamp_moves_with_every_put_claim_and_prune_of_the_agent_only(store):
    agent = proposal()["agent_id"]
    seen = [store.proposal_stamp(agent)]

    def moved() -> bool:
        seen.append(store.proposal_stamp(agent))
        return seen[-1] != seen[-2]

    assert not moved()  # a read moves nothing
    store.proposal_put(proposal("p1"))
    assert moved()
    assert store.proposal_claim("p1", ["pending"], {"status": "rejected", "updated_at": 1001.5})
    assert moved()
    assert store.proposal_claim("p1", ["pending"], {"status": "applied"}) is None
    assert not moved()  # a claim that fails changes nothing
    store.proposal_put(proposal("p9", agent_id="/home/other"))
    store.proposal_claim("p9", ["pending"], {"status": "rejected", "updated_at": 1002.0})
    assert not moved()  # another agent's
    assert store.proposal_prune(agent, 0) == 1
    assert moved()
    assert store.proposal_prune(agent, 0) == 0
    assert not moved()
