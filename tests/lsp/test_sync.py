"""Two windows on one folder, two servers on one store: what one does to a proposal (makes it,
applies it, rejects it) reaches the other's diagnostics without a command; and a server started
after a restart shows the proposals left to review at once. Over the real servers, on SQLite
and on a real Redis."""

from __future__ import annotations

import asyncio
import json

import pytest
from lsprotocol import types

from talos_ls.cli import main
from talos_ls.demo.scripted_model import reply

from ..conftest import redis_for
from .conftest import Editor, start_editor

EDIT = json.dumps({"path": "src/app.py", "blocks": [{"search": "return 1", "replace": "return 2"}]})
SYNC_WAIT_S = 30.0  # generous for a loaded machine; bench/ measures the real latency


async def _propose(editor: Editor, model) -> str:
    model.script += [reply("", [("c1", "propose_edit", EDIT)]), reply("proposed")]
    task_id = (await editor.command("talos.task.start", {"prompt": "return 2"}))["task_id"]
    await editor.finished(task_id)
    (proposal,) = await editor.command("talos.proposal.list", {})
    return proposal["id"]


def _shown(editor: Editor, uri: str) -> list[str]:
    return [str(d.code) for d in editor.client.diagnostics.get(uri) or []]


@pytest.fixture(params=["sqlite", pytest.param("redis", marks=pytest.mark.full)])
def shared_store(request, tmp_path) -> str:
    """The store both servers use: a SQLite file, or a real Redis (flushed after the test)."""
    if request.param == "sqlite":
        return "sqlite:///" + str(tmp_path / "talos.db")
    return redis_for("redis", request).url


async def test_a_reject_in_one_window_clears_the_others_diagnostics(
    tmp_path, ws, options, model, shared_store
):
    options = {**options, "storeUrl": shared_store}
    first = await start_editor(tmp_path / "home1", [ws], options)
    second = await start_editor(tmp_path / "home2", [ws], options)
    try:
        uri = first.open(ws / "src" / "app.py")
        second.open(ws / "src" / "app.py")
        pid = await _propose(first, model)
        # Made in the first: the second shows it without being asked.
        await second.until(lambda: _shown(second, uri) == [pid], "the proposal", SYNC_WAIT_S)
        await first.command("talos.proposal.reject", {"proposal_id": pid})
        await second.until(lambda: _shown(second, uri) == [], "the reject", SYNC_WAIT_S)
        listed = await second.command("talos.proposal.list", {})
        assert [p["status"] for p in listed if p["id"] == pid] in ([], ["rejected"])
    finally:
        await first.stop()
        await second.stop()


async def test_an_apply_by_the_cli_reaches_the_editor(tmp_path, ws, options, model, shared_store):
    options = {**options, "storeUrl": shared_store}
    editor = await start_editor(tmp_path / "home", [ws], options)
    try:
        uri = (ws / "src" / "app.py").as_uri()
        pid = await _propose(editor, model)
        await editor.until(lambda: _shown(editor, uri) == [pid], "the proposal")
        argv = ["--store", shared_store, "apply", pid, "--workspace", str(ws)]
        assert await asyncio.to_thread(main, argv) == 0  # the CLI runs its own event loop
        await editor.until(lambda: _shown(editor, uri) == [], "the apply", SYNC_WAIT_S)
        (proposal,) = await editor.command("talos.proposal.list", {})
        assert proposal["status"] == "applied"
    finally:
        await editor.stop()


async def test_after_a_restart_the_proposals_left_to_review_are_shown_at_once(
    tmp_path, ws, options, model
):
    editor = await start_editor(tmp_path / "home", [ws], options)
    try:
        pid = await _propose(editor, model)
    finally:
        await editor.stop()
    editor = await start_editor(tmp_path / "home", [ws], options)
    try:
        uri = editor.open(ws / "src" / "app.py")
        await editor.until(lambda: _shown(editor, uri) == [pid], "the diagnostic", SYNC_WAIT_S)
        document = types.TextDocumentIdentifier(uri=uri)
        lenses = await editor.client.text_document_code_lens_async(
            types.CodeLensParams(text_document=document)
        )
        assert any(pid in json.dumps(lens.command.arguments) for lens in lenses)
    finally:
        await editor.stop()
