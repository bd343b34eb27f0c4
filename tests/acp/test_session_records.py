"""The session records `session/load` and `session/list` read: what a hostile file or id cannot
do, and the bound on how many are kept."""

from __future__ import annotations

import json
import os
import time

from talos_ls.acp import sessions
from talos_ls.acp.sessions import SessionBook, SessionRecord


def test_a_record_round_trips_and_lists_latest_first(tmp_path):
    book = SessionBook(tmp_path / "records")
    first = SessionRecord.new(tmp_path, "ask")
    first.tasks, first.sizes = ["t1", "t2"], {"t1": 15, "t2": 7, "gone": 3}
    second = SessionRecord.new(tmp_path / "elsewhere", "read-only")
    book.save(first)
    assert first.sizes == {"t1": 15, "t2": 7}  # only its tasks'

    time.sleep(0.01)
    book.save(second)
    assert book.get(first.id) == first
    assert [r.id for r in book.list()] == [second.id, first.id]
    assert [r.id for r in book.list(tmp_path)] == [first.id]
    assert os.stat(book.folder).st_mode & 0o077 == 0  # private


def test_ids_and_files_that_are_not_ours_are_no_records(tmp_path):
    book = SessionBook(tmp_path / "records")
    record = SessionRecord.new(tmp_path, "ask")
    book.save(record)
    for bad in ["../" + record.id, record.id + ".json", "", "s" * 21, "/etc/passwd"]:
        assert book.get(bad) is None
    planted = book.folder / ("s" + "1" * 20 + ".json")
    planted.write_text("{not json")
    other = book.folder / ("s" + "2" * 20 + ".json")
    other.write_text(json.dumps({"id": "s" + "3" * 20, "cwd": "/", "mode": "ask"}))  # id != name
    sized = book.folder / ("s" + "6" * 20 + ".json")
    sized.write_text(json.dumps({"id": sized.stem, "cwd": "/", "mode": "ask", "sizes": [1]}))
    link = book.folder / ("s" + "4" * 20 + ".json")
    link.symlink_to(book.folder / f"{record.id}.json")
    huge = book.folder / ("s" + "5" * 20 + ".json")
    huge.write_text(" " * (sessions.MAX_RECORD_BYTES + 1))
    assert book.get(sized.stem).sizes == {}  # sizes of the wrong shape: none
    sized.unlink()
    assert [r.id for r in book.list()] == [record.id]
    for path in (planted, other, link, huge):
        assert book.get(path.stem) is None


def test_at_most_keep_records(tmp_path, monkeypatch):
    monkeypatch.setattr(sessions, "KEEP", 3)
    book = SessionBook(tmp_path / "records")
    made = []
    for n in range(5):
        record = SessionRecord.new(tmp_path, "ask")
        book.save(record)
        os.utime(book.folder / f"{record.id}.json", (n, n))  # distinct ages on any filesystem
        made.append(record.id)
    book.save(book.get(made[-1]) or SessionRecord.new(tmp_path, "ask"))
    left = {p.stem for p in book.folder.glob("*.json")}
    assert len(left) == 3 and made[-1] in left and made[0] not in left
