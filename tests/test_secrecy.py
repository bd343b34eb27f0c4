"""The person's free-text reply is classified and dropped: it appears in no table, in no byte
of the database files, and in no log line, even at DEBUG and on failure paths."""

from __future__ import annotations

import logging
import sqlite3

from talos_ls.gates.question_queue import QuestionQueue
from talos_ls.store import open_store

from .conftest import disjunction

SECRET = "zebra-7f3c-ssh-passphrase"


def test_free_text_answers_are_never_stored_or_logged(tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    db = tmp_path / "t.db"
    store = open_store("sqlite:///" + str(db))
    qq = QuestionQueue(store)
    replies = [
        f"morning, and my {SECRET}",  # unrecognized
        f"I don't know {SECRET}",  # unrecognized (not exactly a deflection)
        "skip",
        SECRET,
    ]
    for i, reply in enumerate(replies):
        cand, _, _ = disjunction(qq, qq.facts, turn=i * 30, text=f"Question {i}?")
        qq.record_answer(cand, reply, i * 30)
    # An answer whose evidence write fails, and one against a closed store: both log.
    cand, _, _ = disjunction(qq, qq.facts, turn=200, text="Failing?")
    store._conn.execute(
        "CREATE TRIGGER boom BEFORE UPDATE ON facts BEGIN SELECT RAISE(ABORT, 'x'); END"
    )
    assert qq.record_answer(cand, "  MORNING  ", 200).reason == "apply_failed"
    store._conn.execute("DROP TRIGGER boom")
    cand, _, _ = disjunction(qq, qq.facts, turn=300, text="Closed?")
    store.close()
    assert qq.record_answer(cand, SECRET, 300).reason == "error"
    assert caplog.records, "the failure paths should have logged something"

    # Not in any table ...
    conn = sqlite3.connect(db)
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    for table in tables:
        for row in conn.execute(f"SELECT * FROM {table}"):
            assert SECRET not in repr(row), table
    conn.close()
    # ... nor in any byte of the files (main database, WAL, shared memory) ...
    for path in tmp_path.iterdir():
        data = path.read_bytes()
        assert SECRET.encode() not in data, path.name
        assert SECRET.encode("utf-16-le") not in data, path.name
    # ... nor in the logs.
    for record in caplog.records:
        assert SECRET not in record.getMessage()
        assert SECRET not in (record.exc_text or "")
    assert SECRET not in caplog.text
