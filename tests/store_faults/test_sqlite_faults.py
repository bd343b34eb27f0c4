"""SQLite under the daemon: disk full (a file size limit on the server process, or a full
tmpfs), a read-only mount, a corrupted file. Each: the daemon keeps answering, asks nothing,
says once what is wrong and how to fix it, and recovers without a restart; nothing it
acknowledged is lost, and nothing that failed is acknowledged."""

from __future__ import annotations

import os
import resource
import shutil
from collections.abc import Callable
from pathlib import Path

from .conftest import (
    BACK,
    UNAVAILABLE,
    conflict,
    degraded,
    recovered,
    refused,
    remount,
    said,
    server_pid,
    start,
    still_answers,
    task_runs,
)

KEPT = "The build uses make"
LOST = "Deploys go through CI"


async def fault_and_recovery(
    editor, model, ws, brk: Callable[[], None], fix: Callable[[], None], *expected: str
) -> str:
    """The common story: it works; the store breaks; everything that needs it is refused with
    the problem, the rest answers, no question is asked, one message; it is fixed; one message,
    and tasks, facts and questions work again, with what was acknowledged before."""
    await task_runs(editor, model, "first")
    await editor.command("talos.memory.remember", {"statement": KEPT})
    conflict(ws)  # the next turn that runs has a question to ask
    brk()
    # The first failure is the store's own error; the daemon notices it and degrades.
    await refused(editor, "talos.task.start", {"prompt": "write the tests"})
    problem = await degraded(editor, *expected)
    await still_answers(editor, ws)
    await refused(editor, "talos.task.start", {"prompt": "write the tests"}, UNAVAILABLE, *expected)
    await refused(editor, "talos.memory.remember", {"statement": LOST}, UNAVAILABLE)
    await refused(editor, "talos.memory.list", {}, UNAVAILABLE)
    assert editor.prompts == []  # the queue failed closed: nothing asked
    assert len(said(editor, UNAVAILABLE)) == 1, editor.messages()
    assert problem in said(editor, UNAVAILABLE)[0]
    fix()
    await recovered(editor)
    editor.replies.append(editor.button("pytest"))
    await task_runs(editor, model, "write the tests")
    await editor.until(lambda: editor.prompts, "the question, once the store works")
    memory = {f["statement"] for f in await editor.command("talos.memory.list", {})}
    assert KEPT in memory and LOST not in memory
    assert len(said(editor, UNAVAILABLE)) == 1 and len(said(editor, BACK)) == 1
    return problem


async def test_file_size_limit_is_a_full_disk(tmp_path, ws, model):
    """RLIMIT_FSIZE on the server process: every write past the database's size fails, as on
    a full disk; lifted, the daemon takes the store back."""
    db = tmp_path / "db" / "talos.db"
    db.parent.mkdir()
    editor = await start(tmp_path / "home", ws, model, "sqlite:///" + str(db))
    pid = server_pid(editor)
    try:

        def brk() -> None:
            size = max(f.stat().st_size for f in db.parent.iterdir())
            resource.prlimit(pid, resource.RLIMIT_FSIZE, (size, resource.RLIM_INFINITY))

        def fix() -> None:
            resource.prlimit(
                pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY)
            )

        problem = await fault_and_recovery(
            editor, model, ws, brk, fix, "disk full", str(db), "free some space"
        )
        assert problem.startswith("disk full")
    finally:
        await editor.stop()


async def test_full_tmpfs(tmp_path, ws, model, tmpfs):
    db = tmpfs / "talos.db"
    filler = tmpfs / "filler"
    editor = await start(tmp_path / "home", ws, model, "sqlite:///" + str(db))
    try:

        def brk() -> None:
            with filler.open("wb") as fh:
                try:
                    while True:
                        fh.write(b"\0" * 65536)
                        fh.flush()
                except OSError:
                    pass

        await fault_and_recovery(editor, model, ws, brk, filler.unlink, "disk full", str(db))
    finally:
        await editor.stop()


async def broken_between_sessions(
    tmp_path,
    ws,
    model,
    db: Path,
    brk: Callable[[], None],
    fix: Callable[[], None],
    word: str,
    hint: str,
    kept: bool,
) -> None:
    """The store is broken while no daemon runs: a first session stores a task and a fact;
    `brk()`; the next daemon starts, answers, says `word` about `db` with `hint`, refuses
    what needs the store; `fix()`; it recovers without a restart, asks the question held back
    meanwhile, and holds the first session's fact if the file was `kept`."""
    url = "sqlite:///" + str(db)
    first = await start(tmp_path / "home", ws, model, url)
    try:
        await task_runs(first, model, "first")
        await first.command("talos.memory.remember", {"statement": KEPT})
    finally:
        await first.stop()
    brk()
    conflict(ws)
    editor = await start(tmp_path / "home", ws, model, url)
    try:
        problem = await degraded(editor, word, str(db), hint)
        await still_answers(editor, ws)
        await refused(editor, "talos.task.start", {"prompt": "write the tests"}, word)
        await refused(editor, "talos.memory.remember", {"statement": LOST}, word)
        assert editor.prompts == []
        assert len(said(editor, UNAVAILABLE)) == 1 and problem in said(editor, UNAVAILABLE)[0]
        fix()
        await recovered(editor)
        editor.replies.append(editor.button("pytest"))
        await task_runs(editor, model, "write the tests")
        await editor.until(lambda: editor.prompts, "the question, once the store works")
        memory = {f["statement"] for f in await editor.command("talos.memory.list", {})}
        assert (KEPT in memory) == kept and LOST not in memory
        assert len(said(editor, UNAVAILABLE)) == 1 and len(said(editor, BACK)) == 1
    finally:
        await editor.stop()


async def test_read_only_database(tmp_path, ws, model, tmpfs):
    """The database's file system is read-only when the daemon starts (a read-only mount: a
    file system remounted read-only on errors, a read-only bind): the daemon answers, says the
    database is read-only and what to check, and takes it back once it is writable, with
    what it held. (A mount with a file open for writing cannot be remounted read-only, so the
    fault is made between two sessions.)"""
    await broken_between_sessions(
        tmp_path,
        ws,
        model,
        tmpfs / "talos.db",
        lambda: remount(tmpfs, "ro"),
        lambda: remount(tmpfs, "rw"),
        "read-only",
        "check its permissions",
        kept=True,
    )


def garble(db: Path) -> None:
    """Garbage over every page but the first (the header and schema stay readable)."""
    assert not db.with_name("talos.db-wal").exists()  # checkpointed at close
    page = int.from_bytes(db.read_bytes()[16:18], "big") or 65536
    size = db.stat().st_size
    with db.open("r+b") as fh:
        fh.seek(page)
        fh.write(os.urandom(size - page))


async def test_corrupted_file(tmp_path, ws, model):
    """A database with garbage pages: the daemon starts, answers, says the file is corrupted
    and to move it aside; once it is moved, a new one is started without a restart."""
    db = tmp_path / "db" / "talos.db"
    db.parent.mkdir()
    await broken_between_sessions(
        tmp_path,
        ws,
        model,
        db,
        lambda: garble(db),
        lambda: shutil.move(db, db.with_name("talos.db.corrupt")),
        "corrupted",
        "move it aside",
        kept=False,
    )
