"""`talos.task.rewind` in an LSP client: every file a task changed put back in the editor's
buffers, by versioned edits at the buffer's version as an undo is, byte for byte once saved
(a CRLF file, a latin-1 file the editor decoded); a file the person typed in since is left, and
named. A task of no open folder is no task."""

from __future__ import annotations

import json

import pytest

from talos_ls.demo.scripted_model import reply

CRLF = b"one\r\ntwo\r\nthree\r\n"
LATIN1 = b"# caf\xe9 cr\xe8me\nx = 1\n"
APP = b"def main():\n    return 1\n"


def three_edits() -> list:
    edits = [
        ("src/crlf.txt", "two", "TWO"),
        ("src/legacy.py", "x = 1", "x = 2"),
        ("src/app.py", "return 1", "return 10"),
    ]
    calls = [
        (f"c{n}", "propose_edit", json.dumps({"path": p, "blocks": [{"search": s, "replace": r}]}))
        for n, (p, s, r) in enumerate(edits)
    ]
    return [reply("", calls), reply("proposed")]


def write_three(ws) -> None:
    (ws / "src" / "crlf.txt").write_bytes(CRLF)
    (ws / "src" / "legacy.py").write_bytes(LATIN1)
    (ws / "src" / "app.py").write_bytes(APP)


async def run_and_apply(editor, model) -> tuple[str, dict[str, str]]:
    """A task proposing a change to each of the three files, each applied; its id and the
    proposals by path."""
    model.script += three_edits()
    task_id = (await editor.command("talos.task.start", {"prompt": "three"}))["task_id"]
    await editor.finished(task_id)
    made = {p["path"]: p["id"] for p in await editor.command("talos.proposal.list", {})}
    assert len(made) == 3
    for pid in made.values():
        assert (await editor.command("talos.proposal.apply", {"proposal_id": pid}))["applied"]
    return task_id, made


async def test_rewind_puts_the_buffers_back_and_leaves_the_one_typed_in(editor, model, ws):
    write_three(ws)
    uris = {
        "crlf": editor.open(ws / "src" / "crlf.txt", CRLF.decode()),
        "latin": editor.open(ws / "src" / "legacy.py", LATIN1.decode("latin-1")),
        "app": editor.open(ws / "src" / "app.py"),
    }
    task_id, made = await run_and_apply(editor, model)
    assert editor.texts[uris["latin"]] == LATIN1.decode("latin-1").replace("x = 1", "x = 2")
    mine = editor.texts[uris["app"]] + "# mine\n"
    editor.type(uris["app"], mine)
    edits_before = len(editor.edits)

    result = await editor.command("talos.task.rewind", {"task_id": task_id})
    assert result["restored"] == ["src/crlf.txt", "src/legacy.py"]
    assert sorted(result["undone"]) == sorted([made["src/crlf.txt"], made["src/legacy.py"]])
    (left,) = result["left"]
    assert left["path"] == "src/app.py" and "changed after proposal" in left["reason"]
    assert "left src/app.py as it is" in result["message"]
    assert editor.texts[uris["crlf"]].encode() == CRLF
    assert editor.texts[uris["latin"]].encode("latin-1") == LATIN1  # as the editor saves it
    assert editor.texts[uris["app"]] == mine
    # versioned edits, each at the buffer's version, as an undo's
    rewound = editor.edits[edits_before:]
    assert len(rewound) == 2
    assert all(e.edit.document_changes[0].text_document.version for e in rewound)
    listed = {p["path"]: p["status"] for p in await editor.command("talos.proposal.list", {})}
    assert listed["src/crlf.txt"] == listed["src/legacy.py"] == "undone"


async def test_rewind_after_a_restart_on_disk(tmp_path, ws, options, model):
    """The latin-1 file was open in the editor (the task read it as the editor decoded it) and
    saved; the others changed on disk. A new server rewinds on disk, byte for byte."""
    from .conftest import start_editor

    write_three(ws)
    legacy, app = ws / "src" / "legacy.py", ws / "src" / "app.py"
    first = await start_editor(tmp_path / "home", [ws], options)
    try:
        uri = first.open(legacy, LATIN1.decode("latin-1"))
        task_id, _ = await run_and_apply(first, model)
        legacy.write_bytes(first.texts[uri].encode("latin-1"))  # the editor saves it
    finally:
        await first.stop()
    assert legacy.read_bytes() == LATIN1.replace(b"x = 1", b"x = 2")
    assert (ws / "src" / "crlf.txt").read_bytes() == CRLF.replace(b"two", b"TWO")
    app.write_bytes(app.read_bytes() + b"# mine\n")
    second = await start_editor(tmp_path / "home", [ws], options)
    try:
        result = await second.command("talos.task.rewind", {"task_id": task_id})
    finally:
        await second.stop()
    assert result["restored"] == ["src/crlf.txt", "src/legacy.py"]
    assert [left["path"] for left in result["left"]] == ["src/app.py"]
    assert (ws / "src" / "crlf.txt").read_bytes() == CRLF
    assert legacy.read_bytes() == LATIN1
    assert app.read_bytes() == APP.replace(b"return 1", b"return 10") + b"# mine\n"


@pytest.mark.parametrize("task_id", ["t-forged", "", "../../etc/passwd"])
async def test_an_unknown_task_is_refused(editor, task_id):
    with pytest.raises(Exception, match=r"no task|task_id"):
        await editor.command("talos.task.rewind", {"task_id": task_id})


async def test_a_task_of_another_workspace_is_no_task_there(tmp_path, editor, model, ws, options):
    """Two servers on one store: the other folder's server cannot rewind this one's task."""
    from .conftest import start_editor

    write_three(ws)
    editor.open(ws / "src" / "legacy.py", LATIN1.decode("latin-1"))
    task_id, _ = await run_and_apply(editor, model)
    other_ws = tmp_path / "other"
    (other_ws / "src").mkdir(parents=True)
    (other_ws / "src" / "app.py").write_bytes(APP.replace(b"return 1", b"return 10"))
    other = await start_editor(tmp_path / "home2", [other_ws], options)
    try:
        with pytest.raises(Exception, match="no task"):
            await other.command("talos.task.rewind", {"task_id": task_id})
    finally:
        await other.stop()
    assert (other_ws / "src" / "app.py").read_bytes() == APP.replace(b"return 1", b"return 10")
    assert (ws / "src" / "app.py").read_bytes() == APP.replace(b"return 1", b"return 10")
