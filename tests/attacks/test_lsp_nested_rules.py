"""A folder opened or closed inside another while one of the outer folder's tasks runs, against
the real `talos-ls` (deferred prompts, so the test acts while a prompt waits): the running
task's next command is judged with the rules as they are now. The rule sources are built once
and kept (`Policy._built`); this is what keeps them from going stale."""

from __future__ import annotations

import json

from lsprotocol import types

from talos_ls.demo.scripted_model import reply

from ..lsp import conftest as lsp
from ..lsp.test_deferred_prompts import answer, deferred, start
from ..system import require_sandbox
from .test_lsp import calls, tool_results

model, ws, options = lsp.model, lsp.ws, lsp.options


def folders(editor: lsp.Editor, added: list, removed: list) -> None:
    event = types.WorkspaceFoldersChangeEvent(
        added=[types.WorkspaceFolder(uri=f.as_uri(), name=f.name) for f in added],
        removed=[types.WorkspaceFolder(uri=f.as_uri(), name=f.name) for f in removed],
    )
    editor.client.workspace_did_change_workspace_folders(
        types.DidChangeWorkspaceFoldersParams(event=event)
    )


async def served(editor: lsp.Editor, count: int) -> None:
    await editor.until(
        lambda: (s := editor.last_status()) is not None and len(s.folders) == count,
        f"{count} folder(s) served",
    )


async def test_a_folder_opened_or_closed_inside_binds_a_running_task_at_once(
    tmp_path, ws, options, model
):
    require_sandbox()
    inner = ws / "inner"
    (inner / ".talos").mkdir(parents=True)
    (inner / ".talos" / "permissions.json").write_text(
        json.dumps({"commands": {"deny": ["touch"]}})
    )
    editor, prompts = await deferred(tmp_path, ws, options)
    try:
        await served(editor, 1)
        # Opened while the task's first command waits: the second is denied by its rule.
        model.script += [
            reply("", calls("run_command", {"command": "mkdir made"})),
            reply("", calls("run_command", {"command": "touch inner/b"})),
            reply("done"),
        ]
        task = await start(editor, "make and touch")
        first = await prompts.next(editor, 1)
        assert "mkdir made" in first.message
        folders(editor, added=[inner], removed=[])
        await served(editor, 2)
        await answer(editor, first.prompt_id, "Allow once")
        await editor.finished(task)
        made, touched = tool_results(model)
        assert (ws / "made").is_dir(), made
        assert "is denied by" in touched and "of the folder inner" in touched, touched
        assert not (inner / "b").exists() and len(prompts.sent) == 1
        # Closed while the next task's first command waits: the second is asked, not denied.
        model.script += [
            reply("", calls("run_command", {"command": "mkdir made2"})),
            reply("", calls("run_command", {"command": "touch inner/c"})),
            reply("done"),
        ]
        task = await start(editor, "again")
        first = await prompts.next(editor, 2)
        assert "mkdir made2" in first.message
        folders(editor, added=[], removed=[inner])
        await served(editor, 1)
        await answer(editor, first.prompt_id, "Allow once")
        second = await prompts.next(editor, 3)
        assert "touch inner/c" in second.message
        await answer(editor, second.prompt_id, "Allow once")
        await editor.finished(task)
        assert (inner / "c").exists()
    finally:
        await editor.stop()
