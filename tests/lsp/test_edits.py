"""Proposals through the editor: applied over the buffer at its version, never over the
person's unsaved edits; undone while the file is as left."""

from __future__ import annotations

import json

import pytest
from pygls.exceptions import JsonRpcException

from talos_ls.demo.scripted_model import reply

EDIT = json.dumps({"path": "src/app.py", "blocks": [{"search": "return 1", "replace": "return 2"}]})


async def _propose(editor, model):
    model.script += [reply("", [("c1", "propose_edit", EDIT)]), reply("proposed")]
    task_id = (await editor.command("talos.task.start", {"prompt": "return 2"}))["task_id"]
    await editor.finished(task_id)
    (proposal,) = await editor.command("talos.proposal.list", {})
    return proposal


async def test_unsaved_text_wins_and_the_edit_lands_at_the_buffer_version(editor, model, ws):
    uri = editor.open(ws / "src" / "app.py")
    editor.type(uri, "def main():\n    return 1  # unsaved\n")
    proposal = await _propose(editor, model)
    assert proposal["path"] == "src/app.py" and proposal["status"] == "pending"
    shown = await editor.command("talos.proposal.show", {"proposal_id": proposal["id"]})
    assert "+    return 2  # unsaved" in shown["diff"]  # the base was the buffer, not the disk
    result = await editor.command("talos.proposal.apply", {"proposal_id": proposal["id"]})
    assert result == {"proposal_id": proposal["id"], "applied": True, "status": "applied"}
    (edit,) = editor.edits
    assert edit.edit.document_changes[0].text_document.version == 2
    assert (ws / "src" / "app.py").read_text() == "def main():\n    return 1\n"  # disk untouched
    undone = await editor.command("talos.undo", {})
    assert undone["status"] == "undone"
    assert editor.edits[-1].edit.document_changes[0].edits[0].new_text.endswith("1  # unsaved\n")


async def test_a_proposal_over_a_buffer_changed_since_is_stale(editor, model, ws):
    uri = editor.open(ws / "src" / "app.py")
    proposal = await _propose(editor, model)
    editor.type(uri, "def main():\n    return 1\n# typed after the proposal\n")
    result = await editor.command("talos.proposal.apply", {"proposal_id": proposal["id"]})
    assert not result["applied"] and result["status"] == "stale"
    assert editor.edits == []


async def test_an_editor_that_claims_success_without_changing_the_buffer_is_not_believed(
    editor, model, ws
):
    uri = editor.open(ws / "src" / "app.py")
    proposal = await _propose(editor, model)
    editor.versions[uri] = 99  # the editor skips the edit (a stale version), yet says applied
    editor.apply_ok = True
    result = await editor.command("talos.proposal.apply", {"proposal_id": proposal["id"]})
    assert not result["applied"] and result["status"] == "pending"


async def test_a_file_not_open_is_written_on_disk(editor, model, ws):
    proposal = await _propose(editor, model)
    content = await editor.command("talos.proposal.show", {"proposal_id": proposal["id"]})
    assert content["hunks"][0]["new"] == ["    return 2\n"]
    result = await editor.command("talos.proposal.apply", {"proposal_id": proposal["id"]})
    assert result["applied"]
    assert (ws / "src" / "app.py").read_text() == "def main():\n    return 2\n"
    assert editor.edits == []


async def test_reject_and_proposal_content(editor, model):
    proposal = await _propose(editor, model)
    base = await editor.client.protocol.send_request_async(
        "talos/proposalContent", {"proposal_id": proposal["id"], "side": "base"}
    )
    new = await editor.client.protocol.send_request_async(
        "talos/proposalContent", {"proposal_id": proposal["id"], "side": "proposed"}
    )
    assert "return 1" in base and "return 2" in new
    with pytest.raises(JsonRpcException) as caught:
        await editor.client.protocol.send_request_async(
            "talos/proposalContent", {"proposal_id": proposal["id"], "side": "left"}
        )
    assert "'side' must be 'base', 'proposed' or 'diff'" in caught.value.message
    rejected = await editor.command("talos.proposal.reject", {"proposal_id": proposal["id"]})
    assert rejected["status"] == "rejected"
    with pytest.raises(JsonRpcException):
        await editor.command("talos.proposal.reject", {"proposal_id": proposal["id"]})


async def two_hunk_proposal(editor, model, ws) -> tuple[str, str, str]:
    """src/app.py open, and a task's proposal of two hunks on it: (the text, its uri, the id)."""
    base = "def main():\n    return 1\n\n\ndef other():\n    return 3\n"
    (ws / "src" / "app.py").write_text(base)
    uri = editor.open(ws / "src" / "app.py")
    blocks = [{"search": "return 1", "replace": "return 2"}, {"search": "return 3", "replace": "4"}]
    edit = json.dumps({"path": "src/app.py", "blocks": blocks})
    model.script += [reply("", [("c1", "propose_edit", edit)]), reply("proposed")]
    task_id = (await editor.command("talos.task.start", {"prompt": "two changes"}))["task_id"]
    await editor.finished(task_id)
    (proposal,) = await editor.command("talos.proposal.list", {})
    pid = proposal["id"]
    return base, uri, pid


async def test_undo_after_one_hunk_then_the_rest_puts_the_buffer_back_as_it_was(editor, model, ws):
    base, uri, pid = await two_hunk_proposal(editor, model, ws)
    one = await editor.command("talos.proposal.apply", {"proposal_id": pid, "hunks": [1]})
    assert one["status"] == "partly_applied"
    rest = await editor.command("talos.proposal.apply", {"proposal_id": pid})
    assert rest["status"] == "applied" and "return 2" in editor.texts[uri]
    undone = await editor.command("talos.undo", {"uri": uri})
    assert undone["status"] == "undone" and editor.texts[uri] == base


async def test_undo_after_one_hunk_and_typing_names_the_lines_then_restores(editor, model, ws):
    """One hunk applied, then the person types: the rest turns stale, yet "Undo" is offered
    and the hunk is still applied. It says which lines changed since and leaves the buffer;
    once the typing is undone, it puts back the file the proposal was made on."""
    base, uri, pid = await two_hunk_proposal(editor, model, ws)
    one = await editor.command("talos.proposal.apply", {"proposal_id": pid, "hunks": [0]})
    assert one["status"] == "partly_applied"
    applied = editor.texts[uri]
    editor.type(uri, applied + "# typed\n")
    refused = await editor.command("talos.proposal.apply", {"proposal_id": pid})
    assert refused["status"] == "stale"
    with pytest.raises(JsonRpcException) as caught:
        await editor.command("talos.undo", {"proposal_id": pid})
    said = caught.value.message
    assert "(line 7)" in said and "left as it is" in said and "not applied" not in said, said
    assert editor.texts[uri] == applied + "# typed\n"
    editor.type(uri, applied)
    undone = await editor.command("talos.undo", {"proposal_id": pid})
    assert undone["status"] == "undone" and editor.texts[uri] == base
