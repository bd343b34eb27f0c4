"""`talos rewind TASK` and `edits.apply.rewind`: every file a task changed put back as it was
before the task, byte for byte, newest change first, through the one apply path; a file the
person changed since is left, named with why. Every CLI call opens the store afresh: what a
task applied is found by the task after a restart, on every backend."""

from __future__ import annotations

import asyncio
import json

import pytest

from talos_ls.agent.workspace import Workspace, agent_id
from talos_ls.cli import main
from talos_ls.edits import apply
from talos_ls.edits.apply import DiskFiles
from talos_ls.edits.proposals import ProposalBook, ProposalError
from talos_ls.store import open_store

CRLF = b"one\r\ntwo\r\nthree\r\n"
LATIN1 = b"# caf\xe9 cr\xe8me\nx = 1\n"
APP = b"def a():\n    return 1\n"


def task_row(task_id: str, ws) -> dict:
    return {
        "id": task_id,
        "agent_id": agent_id(ws),
        "state": "done",
        "title": "change three files",
        "created_at": 1.0,
        "updated_at": 2.0,
        "cost": "0",
        "error": None,
        "transcript": [],
        "owner": None,
    }


def make_task(url: str, ws, task_id: str = "t-three") -> dict[str, str]:
    """A task that proposed changes to three files (two to app.py, the second made on the
    first's result), applied by the person through `talos apply`; the latin-1 one made on the
    file as an editor reads it."""
    (ws / "crlf.txt").write_bytes(CRLF)
    (ws / "legacy.py").write_bytes(LATIN1)
    (ws / "app.py").write_bytes(APP)
    store = open_store(url)
    store.task_put(task_row(task_id, ws))
    book = ProposalBook(store, agent_id(ws))
    latin = LATIN1.decode("latin-1")
    made = {
        "crlf": book.create(
            "crlf.txt", CRLF.decode(), "one\r\nTWO\r\nthree\r\nfour\r\n", task_id=task_id
        ).id,
        "latin": book.create(
            "legacy.py", latin, latin.replace("x = 1", "x = 2"), task_id=task_id
        ).id,
        "app1": book.create(
            "app.py", APP.decode(), APP.decode() + "\n\ndef b(): ...\n", task_id=task_id
        ).id,
    }
    store.close()
    return made


@pytest.fixture
def ws(tmp_path):
    path = tmp_path / "ws"
    path.mkdir()
    return path


def talos(url, ws, *argv):
    return main(["--store", url, *argv, "--workspace", str(ws)])


def test_rewind_restores_the_others_byte_for_byte_and_leaves_the_persons_edit(
    store_url, ws, capsys
):
    made = make_task(store_url, ws)
    for pid in made.values():
        assert talos(store_url, ws, "apply", pid) == 0
    # the task's second change to app.py, made on the first's result
    store = open_store(store_url)
    book = ProposalBook(store, agent_id(ws))
    app1 = (ws / "app.py").read_text()
    second = book.create("app.py", app1, app1.replace("return 1", "return 10"), task_id="t-three")
    store.close()
    assert talos(store_url, ws, "apply", second.id) == 0
    assert (ws / "legacy.py").read_bytes() == LATIN1.replace(b"x = 1", b"x = 2")  # still latin-1
    mine = (ws / "app.py").read_bytes() + b"# mine\n"
    (ws / "app.py").write_bytes(mine)
    capsys.readouterr()

    assert talos(store_url, ws, "rewind", "t-three", "--json") == 1
    out = json.loads(capsys.readouterr().out)
    assert out["restored"] == ["crlf.txt", "legacy.py"]
    assert [left["path"] for left in out["left"]] == ["app.py"]
    assert "app.py changed after proposal" in out["left"][0]["reason"]
    assert "left as it is" in out["left"][0]["reason"]
    assert (ws / "crlf.txt").read_bytes() == CRLF
    assert (ws / "legacy.py").read_bytes() == LATIN1
    assert (ws / "app.py").read_bytes() == mine  # the person's edit is never lost

    # again: what is rewound stays so, the edited file is still named
    assert talos(store_url, ws, "rewind", "t-three") == 1
    said = capsys.readouterr().out
    assert "no file restored" in said and "left app.py as it is" in said
    # the person takes their edit back: the rest of the task is rewound, newest change first
    (ws / "app.py").write_bytes(mine[: -len(b"# mine\n")])
    assert talos(store_url, ws, "rewind", "t-three") == 0
    assert "restored app.py" in capsys.readouterr().out
    assert (ws / "app.py").read_bytes() == APP
    assert talos(store_url, ws, "rewind", "t-three") == 1
    assert "undone already" in capsys.readouterr().err


def test_only_the_tasks_own_proposals_are_rewound(tmp_path, ws, capsys):
    url = "sqlite:///" + str(tmp_path / "talos.db")
    made = make_task(url, ws)
    store = open_store(url)
    store.task_put(task_row("t-other", ws))
    other = ProposalBook(store, agent_id(ws)).create("other.txt", "", "new\n", task_id="t-other")
    store.close()
    for pid in [*made.values(), other.id]:
        assert talos(url, ws, "apply", pid) == 0
    assert talos(url, ws, "rewind", "t-th") == 0  # a prefix, as `talos show` takes
    assert "restored app.py, crlf.txt, legacy.py" in capsys.readouterr().out
    assert (ws / "other.txt").read_text() == "new\n"


def test_unknown_tasks_and_tasks_that_applied_nothing(tmp_path, ws, capsys):
    url = "sqlite:///" + str(tmp_path / "talos.db")
    make_task(url, ws)
    assert talos(url, ws, "rewind", "t-nope") == 1
    assert "no task has the id 't-nope' in this workspace" in capsys.readouterr().err
    assert talos(url, ws, "rewind", "t-three") == 1  # nothing applied yet
    assert "it applied no proposal" in capsys.readouterr().err
    assert (ws / "app.py").read_bytes() == APP


def test_rewind_in_memory_newest_first_over_several_changes_to_one_file(tmp_path):
    """Three chained changes to one CRLF file, then one to another: all undone, newest first;
    a failed write (the file became a directory) is named, not raised."""
    workspace = Workspace(tmp_path)
    (tmp_path / "a.txt").write_bytes(b"1\r\n")
    book, files = ProposalBook(), DiskFiles(workspace)
    text = "1\r\n"
    for n in (2, 3, 4):
        p = book.create("a.txt", text, text + f"{n}\r\n", task_id="t")
        assert asyncio.run(apply.apply(book, files, p.id))
        text += f"{n}\r\n"
    b = book.create("b.txt", "", "b\n", task_id="t")
    assert asyncio.run(apply.apply(book, files, b.id))
    (tmp_path / "b.txt").unlink()
    (tmp_path / "b.txt").mkdir()
    done = asyncio.run(apply.rewind(book, files, "t"))
    assert (tmp_path / "a.txt").read_bytes() == b"1\r\n"
    assert done.restored() == ["a.txt"] and list(done.left) == ["b.txt"]
    assert [p.path for p in done.undone] == ["a.txt"] * 3
    with pytest.raises(ProposalError, match="applied no proposal"):
        asyncio.run(apply.rewind(book, files, "t-unknown"))


def test_a_partly_applied_proposal_gone_stale_leaves_its_file_until_the_edit_is_gone(tmp_path):
    workspace = Workspace(tmp_path)
    base = "a = 1\n\n\n\nb = 2\n"
    (tmp_path / "a.py").write_text(base)
    book, files = ProposalBook(), DiskFiles(workspace)
    p = book.create("a.py", base, base.replace("1", "10").replace("2", "20"), task_id="t")
    assert asyncio.run(apply.apply(book, files, p.id, [0]))
    mine = (tmp_path / "a.py").read_text() + "# mine\n"
    (tmp_path / "a.py").write_text(mine)
    book.base_changed("a.py", mine)
    done = asyncio.run(apply.rewind(book, files, "t"))
    assert "a.py changed after proposal" in done.left["a.py"], done.left
    assert "(line 6)" in done.left["a.py"], done.left
    assert (tmp_path / "a.py").read_text() == mine
    # The edit gone, a second rewind puts the file back as it was before the task.
    (tmp_path / "a.py").write_text(mine.removesuffix("# mine\n"))
    done = asyncio.run(apply.rewind(book, files, "t"))
    assert done.restored() == ["a.py"] and not done.left, done.left
    assert (tmp_path / "a.py").read_text() == base
