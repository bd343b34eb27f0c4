"""The `openai` import and the model client are prepared off the event loop, from the moment the
server serves its folder: a request is answered while the import runs, and the first task waits
for it without holding anything else up. The import is held by a test-only `sitecustomize`
(`openai_gate/`) until the test lets it go: no timing is assumed."""

from __future__ import annotations

import asyncio
from pathlib import Path

from lsprotocol import types

from talos_ls.demo.scripted_model import reply

from .conftest import WAIT_S, start_editor

GATE = Path(__file__).parent / "openai_gate"


async def _actions(editor, uri: str) -> list:
    params = types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        range=types.Range(
            start=types.Position(line=0, character=0), end=types.Position(line=1, character=0)
        ),
        context=types.CodeActionContext(diagnostics=[]),
    )
    return await asyncio.wait_for(editor.client.text_document_code_action_async(params), WAIT_S)


async def test_the_loop_answers_while_openai_imports_and_the_first_task_waits(
    tmp_path, ws, options, model
):
    gate = tmp_path / "openai-gate"
    importing = Path(f"{gate}.importing")
    env = {"PYTHONPATH": str(GATE), "TALOS_TEST_OPENAI_GATE": str(gate)}
    editor = await start_editor(tmp_path / "home", [ws], options, env=env)
    try:
        # Begun with the folder's host, before any task, and not on the event loop's thread.
        await editor.until(importing.exists, "the import of openai to begin")
        assert importing.read_text() != "MainThread"
        uri = editor.open(ws / "src" / "app.py")
        assert [a.title for a in await _actions(editor, uri)] == ["Ask Talos about the selection"]
        assert "settings" in await editor.command("talos.status", {})

        model.script.append(reply("main returns 1."))
        task_id = (await editor.command("talos.task.start", {"prompt": "what does main do?"}))[
            "task_id"
        ]
        await editor.until(lambda: editor.progress(task_id), "the task's progress")
        # The task waits for the client; the loop does not.
        assert await _actions(editor, uri)
        assert (await editor.task(task_id))["state"] == "running"
        assert model.requests == [] and not gate.exists()

        gate.touch()
        reports = await editor.finished(task_id)
        assert reports[-1].message.startswith("done")
        assert len(model.requests) == 1
        await editor.until(
            lambda: any("main returns 1." in m for m in editor.messages()), "the answer"
        )
    finally:
        gate.touch()  # a failed test must not leave the server's import held
        await editor.stop()
