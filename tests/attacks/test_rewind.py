"""A rewind never writes outside its workspace, nor another workspace's files.

- a task id of another workspace (in a store they share) is no task here: refused, nothing
  written in either workspace;
- a forged or unknown id (empty, a path, a prefix of nothing) is refused;
- a file the task changed, swapped for a symlink leading out of the workspace after the apply
  (or a directory on its way swapped so), is left and named: the target outside is untouched,
  from the CLI and from the language server with the file open in the editor;
- a proposal row forged into the store with a path that climbs out is left the same way.
"""

from __future__ import annotations

import hashlib
import os

import pytest

from talos_ls.agent.workspace import agent_id
from talos_ls.cli import main
from talos_ls.edits.proposals import ProposalBook
from talos_ls.store import open_store

from ..test_rewind import task_row

OUTSIDE = b"the person's other file, outside the workspace\n"


@pytest.fixture
def two(tmp_path):
    url = "sqlite:///" + str(tmp_path / "talos.db")
    mine, theirs, outside = tmp_path / "mine", tmp_path / "theirs", tmp_path / "outside"
    for d in (mine, theirs):
        (d / "src").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.txt").write_bytes(OUTSIDE)
    return url, mine, theirs, outside


def applied_task(url, ws, task_id, files):
    """A task of `ws` that applied a change to each of `files` (path -> text)."""
    store = open_store(url)
    store.task_put(task_row(task_id, ws))
    book = ProposalBook(store, agent_id(ws))
    made = []
    for path, text in files.items():
        (ws / path).write_text(text)
        made.append(book.create(path, text, text + "changed\n", task_id=task_id).id)
    store.close()
    for pid in made:
        assert main(["--store", url, "apply", pid, "--workspace", str(ws)]) == 0
    return made


def rewind(url, ws, task_id, *more):
    return main(["--store", url, "rewind", task_id, *more, "--workspace", str(ws)])


def test_a_task_of_another_workspace_is_no_task_here(two, capsys):
    url, mine, theirs, _ = two
    applied_task(url, theirs, "t-theirs", {"src/a.txt": "a\n"})
    (mine / "src" / "a.txt").write_text("a\nchanged\n")  # the same name, the same text
    assert rewind(url, mine, "t-theirs") == 1
    assert "no task has the id 't-theirs' in this workspace" in capsys.readouterr().err
    assert (mine / "src" / "a.txt").read_text() == "a\nchanged\n"
    assert (theirs / "src" / "a.txt").read_text() == "a\nchanged\n"


@pytest.mark.parametrize("forged", ["", "t-nope", "../t-mine", "/etc/passwd", "%", "t-mine\n"])
def test_forged_or_unknown_ids_are_refused(two, capsys, forged):
    url, mine, _, _ = two
    applied_task(url, mine, "t-mine", {"src/a.txt": "a\n"})
    capsys.readouterr()
    assert rewind(url, mine, forged) == 1
    assert "no task has the id" in capsys.readouterr().err
    assert (mine / "src" / "a.txt").read_text() == "a\nchanged\n"


@pytest.mark.parametrize("swap", ["file", "directory"])
def test_a_symlink_swapped_in_after_the_apply_is_not_followed(two, capsys, swap):
    url, mine, _, outside = two
    applied_task(url, mine, "t-mine", {"src/a.txt": "a\n", "src/b.txt": "b\n"})
    if swap == "file":
        secret = outside / "secret.txt"
        (mine / "src" / "a.txt").unlink()
        os.symlink(secret, mine / "src" / "a.txt")
    else:  # the file's directory, moved away and replaced by a link to the outside
        secret = outside / "a.txt"
        secret.write_bytes(b"a\nchanged\n")  # what the task left, where the link leads: bait
        (mine / "src").rename(mine / "src-moved")
        os.symlink(outside, mine / "src")
    there = sorted(p.name for p in outside.iterdir())
    before = secret.read_bytes()
    capsys.readouterr()
    assert rewind(url, mine, "t-mine", "--json") == 1
    out = capsys.readouterr().out
    assert "outside the workspace" in out and "src/a.txt" in out
    assert secret.read_bytes() == before
    assert sorted(p.name for p in outside.iterdir()) == there  # no file made there
    if swap == "file":
        assert (mine / "src" / "b.txt").read_text() == "b\n"  # the rest is rewound


def test_a_forged_proposal_path_that_climbs_out_is_left(two, capsys):
    url, mine, _, outside = two
    store = open_store(url)
    store.task_put(task_row("t-mine", mine))
    book = ProposalBook(store, agent_id(mine))
    (mine / "src" / "a.txt").write_text("x\n")
    p = book.create("src/a.txt", "x\n", "y\n", task_id="t-mine")
    store.close()
    assert main(["--store", url, "apply", p.id, "--workspace", str(mine)]) == 0
    # someone with the store's file rewrites the row to point outside
    store = open_store(url)
    forged = store.proposal_get(p.id)
    forged["path"] = "../outside/secret.txt"
    forged["applied_hash"] = hashlib.sha256(OUTSIDE).hexdigest()  # it matches the target
    forged["undo_text"] = "overwritten\n"
    store.proposal_put(forged)
    store.close()
    capsys.readouterr()
    assert rewind(url, mine, "t-mine") == 1
    assert "outside the workspace" in capsys.readouterr().out
    assert (outside / "secret.txt").read_bytes() == OUTSIDE


async def test_an_open_buffer_swapped_for_a_symlink_gets_no_edit(tmp_path):
    """In the editor: the file the task changed is open; once it is a symlink leading out,
    the rewind sends the editor no edit (saved, it would be written through the link)."""
    import json

    from talos_ls.demo.scripted_model import ScriptedModelServer, reply

    from ..lsp.conftest import start_editor

    ws, outside = tmp_path / "ws", tmp_path / "outside"
    (ws / "src").mkdir(parents=True)
    outside.mkdir()
    target = ws / "src" / "a.txt"
    target.write_text("a\n")
    model = ScriptedModelServer()
    edit = json.dumps({"path": "src/a.txt", "blocks": [{"search": "a", "replace": "b"}]})
    model.script += [reply("", [("c1", "propose_edit", edit)]), reply("proposed")]
    options = {"model": "fake-model", "baseUrl": model.url}
    options["storeUrl"] = "sqlite:///" + str(tmp_path / "talos.db")
    editor = await start_editor(tmp_path / "home", [ws], options)
    try:
        uri = editor.open(target)
        task_id = (await editor.command("talos.task.start", {"prompt": "b"}))["task_id"]
        await editor.finished(task_id)
        (proposal,) = await editor.command("talos.proposal.list", {})
        assert (await editor.command("talos.proposal.apply", {"proposal_id": proposal["id"]}))[
            "applied"
        ]
        secret = outside / "secret.txt"
        secret.write_text(editor.texts[uri])  # what the task left: the hashes would match
        target.unlink()
        os.symlink(secret, target)
        sent = len(editor.edits)
        result = await editor.command("talos.task.rewind", {"task_id": task_id})
        assert result["restored"] == []
        (left,) = result["left"]
        assert left["path"] == "src/a.txt" and "outside the workspace" in left["reason"]
        assert len(editor.edits) == sent and editor.texts[uri] == "b\n"
        assert secret.read_text() == "b\n"
    finally:
        await editor.stop()
        model.close()
