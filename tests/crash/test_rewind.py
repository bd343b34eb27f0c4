"""SIGKILL the real talos-ls just after a task's proposals were applied, start a new one on the
same store and workspace (SQLite and Redis: `store_url`): `talos.task.rewind` still finds every
proposal the task applied and puts the files back byte for byte, leaving the one the person
changed since; `talos rewind` (the CLI, another process) agrees."""

from __future__ import annotations

import asyncio
import json

from talos_ls.cli import main

from ..lsp.test_rewind import APP, CRLF, LATIN1, run_and_apply, write_three
from .conftest import close, launch, sigkill


async def test_rewind_after_a_sigkill_and_a_restart(
    tmp_path, ws, options, model, store_url, capsys
):
    write_three(ws)
    legacy, app, crlf = ws / "src" / "legacy.py", ws / "src" / "app.py", ws / "src" / "crlf.txt"
    first = await launch(tmp_path / "home", ws, options)
    try:
        uri = first.open(legacy, LATIN1.decode("latin-1"))  # the editor decoded it so
        task_id, _ = await run_and_apply(first, model)
        legacy.write_bytes(first.texts[uri].encode("latin-1"))  # and saves it
        await sigkill(first)  # at once, just after the last apply was acknowledged
    finally:
        await close(first)
    assert crlf.read_bytes() == CRLF.replace(b"two", b"TWO")
    mine = app.read_bytes() + b"# mine\n"
    app.write_bytes(mine)

    # the CLI first: it finds the task's proposals in the store the dead server left
    argv = ["--store", store_url, "rewind", task_id, "--json", "--workspace", str(ws)]
    assert await asyncio.to_thread(main, argv) == 1  # its own event loop
    said = json.loads(capsys.readouterr().out)
    assert said["restored"] == ["src/crlf.txt", "src/legacy.py"]
    assert [left["path"] for left in said["left"]] == ["src/app.py"]
    assert crlf.read_bytes() == CRLF and legacy.read_bytes() == LATIN1 and app.read_bytes() == mine

    # then a new server: the same answer, nothing written twice; once the person's edit is
    # gone, the last file is rewound too
    editor = await launch(tmp_path / "home", ws, options)
    try:
        again = await editor.command("talos.task.rewind", {"task_id": task_id})
        assert again["restored"] == [] and [x["path"] for x in again["left"]] == ["src/app.py"]
        assert app.read_bytes() == mine
        app.write_bytes(mine[: -len(b"# mine\n")])
        last = await editor.command("talos.task.rewind", {"task_id": task_id})
        assert last["restored"] == ["src/app.py"] and last["left"] == []
        assert app.read_bytes() == APP
        assert crlf.read_bytes() == CRLF and legacy.read_bytes() == LATIN1
    finally:
        await close(editor)
