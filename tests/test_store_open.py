"""open_store: URLs, the default location, and files that are not ours."""

from __future__ import annotations

import sqlite3

import pytest

from talos_ls.memory.facts import FactStore
from talos_ls.store import StoreError, default_store_url, open_store, redact_url
from talos_ls.store.sqlite import APPLICATION_ID, SCHEMA_VERSION


@pytest.mark.parametrize(
    "url, words",
    [
        ("", "empty"),
        ("/tmp/x.db", "no scheme"),
        ("postgres://db/x", "unsupported scheme 'postgres'"),
        ("sqlite://relative.db", "expected sqlite:///"),
        ("sqlite:///", "names no database file"),
        ("sqlite:////tmp/x.db?cache=big", "unknown parameter cache"),
        ("sqlite:////tmp/x.db?timeout=soon", "timeout must be"),
        ("sqlite:////no/such/dir/talos.db", "directory /no/such/dir does not exist"),
    ],
)
def test_bad_urls_get_one_clear_error(url, words):
    with pytest.raises(StoreError) as err:
        open_store(url)
    assert words in str(err.value)
    if url:
        assert url.split("?")[0] in str(err.value) or "no scheme" in str(err.value)


def test_passwords_are_redacted_in_errors():
    with pytest.raises(StoreError) as err:
        open_store("mongodb://talos:hunter2@db.example:27017/x")
    assert "hunter2" not in str(err.value) and "talos:***@db.example:27017" in str(err.value)
    assert redact_url("sqlite:////a/b.db") == "sqlite:////a/b.db"


def test_a_directory_is_refused(tmp_path):
    with pytest.raises(StoreError, match="is a directory"):
        open_store("sqlite:///" + str(tmp_path))


@pytest.mark.parametrize("content", [b"hello, this is my notes file\n", b"\x00" * 4096])
def test_a_non_sqlite_file_is_refused_and_untouched(tmp_path, content):
    path = tmp_path / "notes.db"
    path.write_bytes(content)
    with pytest.raises(StoreError, match="not a Talos database") as err:
        open_store("sqlite:///" + str(path))
    assert str(path) in str(err.value)
    assert path.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.db"]


def test_another_apps_sqlite_file_is_refused_and_untouched(tmp_path):
    path = tmp_path / "app.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE users (id INTEGER)")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(StoreError, match=r"not a Talos one \(it holds tables: users\)"):
        open_store("sqlite:///" + str(path))
    assert path.read_bytes() == before


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "t.db"
    open_store("sqlite:///" + str(path)).close()
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(StoreError, match="newer Talos"):
        open_store("sqlite:///" + str(path))


def test_empty_file_and_fresh_file_are_initialised(tmp_path):
    empty = tmp_path / "empty.db"
    empty.touch()
    for path in (empty, tmp_path / "fresh.db"):
        store = open_store("sqlite:///" + str(path))
        key = FactStore(store).add("a1", "x")
        store.close()
        conn = sqlite3.connect(path)
        assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        conn.close()
        reopened = open_store("sqlite:///" + str(path))
        assert FactStore(reopened).get(key).statement == "x"
        reopened.close()


def test_relative_and_memory_urls(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    open_store("sqlite:///rel.db").close()
    assert (tmp_path / "rel.db").exists()
    mem = open_store("sqlite:///:memory:")
    assert FactStore(mem).get(FactStore(mem).add("a", "b")) is not None
    mem.close()


def test_read_only_store_reads_and_refuses_writes(tmp_path):
    url = "sqlite:///" + str(tmp_path / "t.db")
    rw = open_store(url)
    key = FactStore(rw).add("a1", "x")
    rw.close()
    ro = open_store(url + "?mode=ro")
    facts = FactStore(ro)
    assert facts.get(key).statement == "x"
    with pytest.raises(StoreError, match="readonly"):
        facts.add("a1", "y")
    ro.close()
    with pytest.raises(StoreError, match="does not exist"):
        open_store("sqlite:///" + str(tmp_path / "missing.db") + "?mode=ro")
    assert not (tmp_path / "missing.db").exists()


def test_closed_store_says_so(tmp_path):
    store = open_store("sqlite:///" + str(tmp_path / "t.db"))
    store.close()
    store.close()  # idempotent
    with pytest.raises(StoreError, match="is closed"):
        FactStore(store).add("a1", "x")


def test_default_location(tmp_path, monkeypatch):
    monkeypatch.setenv("TALOS_STORE_URL", "sqlite:///" + str(tmp_path / "env.db"))
    assert default_store_url() == "sqlite:///" + str(tmp_path / "env.db")
    open_store().close()
    assert (tmp_path / "env.db").exists()
    monkeypatch.delenv("TALOS_STORE_URL")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert default_store_url() == "sqlite:///" + str(tmp_path / "state" / "talos" / "talos.db")
    open_store().close()  # the default directory is created
    assert (tmp_path / "state" / "talos" / "talos.db").exists()


def test_a_version_1_file_is_migrated_and_keeps_its_facts(tmp_path):
    from talos_ls.store.sqlite import MIGRATIONS

    path = tmp_path / "v1.db"
    conn = sqlite3.connect(path)
    for statement in MIGRATIONS[0]:
        conn.execute(statement)
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute("PRAGMA user_version = 1")
    conn.execute(
        "INSERT INTO facts VALUES ('fact:old', 'a1', 'tests use unittest', 0.8, 3, 3, 0, 1.0, "
        "NULL, NULL)"
    )
    conn.commit()
    conn.close()
    store = open_store("sqlite:///" + str(path))
    fact = FactStore(store).get("fact:old")
    assert (fact.statement, fact.confidence, fact.source, fact.subject) == (
        "tests use unittest",
        0.8,
        "model",
        None,
    )
    assert store.journal_live("a1") == []
    store.close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 6
    conn.close()
