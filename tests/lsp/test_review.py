"""Reviewing proposals in any LSP client: diagnostics, code actions, code lenses, per-hunk
application with exact edits, staleness, the diff."""

from __future__ import annotations

import asyncio
import itertools
import json

import pytest
from lsprotocol import types

from talos_ls.demo.scripted_model import reply
from talos_ls.lsp.review import text_edits

from .conftest import apply_edits, capabilities, start_editor

BASE = "def a():\n    return 1\n\n\ndef b():\n    return 2\n"
TWO_HUNKS = json.dumps(
    {
        "path": "src/app.py",
        "blocks": [
            {"search": "return 1", "replace": "return 10"},
            {"search": "return 2", "replace": "return 20"},
        ],
    }
)


async def _propose(editor, model, arguments=TWO_HUNKS):
    model.script += [reply("", [("c1", "propose_edit", arguments)]), reply("proposed")]
    task_id = (await editor.command("talos.task.start", {"prompt": "bigger"}))["task_id"]
    await editor.finished(task_id)
    (proposal,) = await editor.command("talos.proposal.list", {})
    return proposal


def _range(line_a, line_b):
    return types.Range(
        start=types.Position(line=line_a, character=0), end=types.Position(line=line_b, character=0)
    )


async def _actions(editor, uri, line):
    return await editor.client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=_range(line, line),
            context=types.CodeActionContext(diagnostics=[]),
        )
    )


async def _run(editor, action):
    return await editor.command(action.command.command, *action.command.arguments)


async def test_diagnostics_actions_and_lenses_then_one_hunk_applied(editor, model, ws):
    app = ws / "src" / "app.py"
    app.write_text(BASE)
    uri = editor.open(app)
    proposal = await _propose(editor, model)
    found = await editor.until(lambda: editor.client.diagnostics.get(uri), "the diagnostics")
    assert [(d.range.start.line, d.range.end.line) for d in found] == [(1, 2), (5, 6)]
    assert {d.source for d in found} == {"talos"}
    assert {d.severity for d in found} == {types.DiagnosticSeverity.Information}
    assert "change 2 of 2: -1 +1 line(s): return 20" in found[1].message
    actions = await _actions(editor, uri, 5)
    pid = proposal["id"]
    assert [a.title for a in actions][:4] == [
        "Apply this hunk (2 of 2)",
        f"Apply {pid} (all 2 changes)",
        f"Reject {pid}",
        f"Show diff of {pid}",
    ]
    assert not await _actions(editor, uri, 3)  # a line between the hunks
    lenses = await editor.client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    assert [(lens.range.start.line, lens.command.title) for lens in lenses][:2] == [
        (1, "Apply this hunk (1 of 2)"),
        (1, f"Apply {pid} (all 2 changes)"),
    ]
    assert len(lenses) == 8
    result = await _run(editor, actions[0])
    assert result["applied"] and result["status"] == "partly_applied"
    assert editor.texts[uri] == BASE.replace("return 2", "return 20")  # that hunk, no other
    (left,) = await editor.until(
        lambda: len(d := editor.client.diagnostics[uri]) == 1 and d, "one diagnostic left"
    )
    assert left.range.start.line == 1 and "change 1 of 1" in left.message
    result = await editor.command("talos.proposal.apply", {"proposal_id": pid})
    assert result["applied"] and result["status"] == "applied"
    assert editor.texts[uri] == BASE.replace("return 2", "return 20").replace("n 1", "n 10")
    await editor.until(lambda: len(editor.client.diagnostics[uri]) == 0, "the diagnostics gone")
    undone = await editor.command("talos.undo", {})
    assert undone["status"] == "undone"
    assert editor.texts[uri] == BASE  # both applications: the file the proposal was made on


@pytest.mark.parametrize(
    "base",
    [
        "é😀 = 1\r\nline = 2\r\nx = 1\r\n",
        "a = '😀😀'\nx = 1",  # no final newline
        "a\rb\rx = 1\r",  # lone CR endings
        "form\x0cfeed = 1\nsep\u2028y = 1\nx = 1\n",  # not line breaks for an editor
    ],
)
async def test_an_edit_lands_exactly_whatever_the_text(editor, model, ws, base):
    app = ws / "src" / "app.py"
    app.write_bytes(base.encode())
    uri = editor.open(app, base)
    edit = json.dumps(
        {"path": "src/app.py", "blocks": [{"search": "x = 1", "replace": "x = 'ä𝄞'"}]}
    )
    proposal = await _propose(editor, model, edit)
    result = await editor.command("talos.proposal.apply", {"proposal_id": proposal["id"]})
    assert result["applied"]
    assert editor.texts[uri] == base.replace("x = 1", "x = 'ä𝄞'")


async def test_a_proposal_turns_stale_when_the_person_types_and_is_refused(editor, model, ws):
    app = ws / "src" / "app.py"
    app.write_text(BASE)
    uri = editor.open(app)
    proposal = await _propose(editor, model)
    editor.type(uri, BASE + "# typed\n")
    found = await editor.until(
        lambda: (d := editor.client.diagnostics.get(uri)) and "stale" in d[0].message and d,
        "stale diagnostics",
    )
    assert found[0].severity == types.DiagnosticSeverity.Warning
    actions = await _actions(editor, uri, 1)
    titles = [a.title for a in actions]
    assert not any(t.startswith("Apply") for t in titles) and f"Reject {proposal['id']}" in titles
    (redo,) = [a for a in actions if a.title.startswith("Ask Talos to redo")]
    assert redo.command.command == "talos.task.start"  # only when the person asks
    assert proposal["id"] in redo.command.arguments[0]["prompt"]
    result = await editor.command("talos.proposal.apply", {"proposal_id": proposal["id"]})
    assert not result["applied"] and result["status"] == "stale"
    assert editor.texts[uri] == BASE + "# typed\n"


async def _shown_diff(tmp_path, ws, options, model, **extra):
    """`talos.proposal.diff` at a client that can show documents: (what it answered, the
    proposal, the documents it was asked to show)."""
    caps = capabilities()
    caps.window.show_document = types.ShowDocumentClientCapabilities(support=True)
    editor = await start_editor(tmp_path / "home", [ws], {**options, **extra}, caps=caps)
    try:
        proposal = await _propose(
            editor,
            model,
            json.dumps(
                {"path": "src/app.py", "blocks": [{"search": "return 1", "replace": "return 2"}]}
            ),
        )
        shown = await editor.command("talos.proposal.diff", {"proposal_id": proposal["id"]})
        served = await editor.client.protocol.send_request_async(
            "talos/proposalContent", {"proposal_id": proposal["id"], "side": "diff"}
        )
        assert served == shown["diff"] and "-    return 1\n+    return 2\n" in served
        return shown, proposal, [d.uri for d in editor.client.shown_documents]
    finally:
        await editor.stop()


async def test_show_diff_returns_it_and_opens_it_where_the_client_can(tmp_path, ws, options, model):
    shown, _, documents = await _shown_diff(tmp_path, ws, options, model)
    assert documents == [shown["uri"]] and shown["uri"].startswith("file://")
    assert not shown["uri"].startswith(ws.as_uri())  # outside the workspace


async def test_show_diff_as_a_virtual_document_for_a_content_provider(tmp_path, ws, options, model):
    shown, proposal, documents = await _shown_diff(
        tmp_path, ws, options, model, contentProvider=True
    )
    assert documents == [shown["uri"]] == [f"talos-proposal:/{proposal['id']}.diff"]


CASES = ["", "a", "a\n", "a\nb", "a\r\nb\r\n", "a\rb", "😀\n𝄞x\n", "é\r\nü", "\n\n\n", "x\u2028y\n"]


@pytest.mark.parametrize("old, new", list(itertools.product(CASES, CASES)))
def test_text_edits_turn_old_into_new(old, new):
    assert apply_edits(old, text_edits(old, new)) == new


async def test_a_write_on_disk_makes_a_proposal_stale(tmp_path, ws, options, model):
    from .conftest import capabilities as caps

    editor = await start_editor(tmp_path / "home", [ws], options, caps=caps(watches=True))
    try:
        app = ws / "src" / "app.py"
        app.write_text(BASE)
        proposal = await _propose(editor, model)
        app.write_text(BASE + "# written by another tool\n")
        event = types.FileEvent(uri=app.as_uri(), type=types.FileChangeType.Changed)
        editor.client.workspace_did_change_watched_files(
            types.DidChangeWatchedFilesParams(changes=[event])
        )
        found = await editor.until(
            lambda: (d := editor.client.diagnostics.get(app.as_uri())) and "stale" in d[0].message,
            "stale diagnostics",
        )
        assert found
        result = await editor.command("talos.proposal.apply", {"proposal_id": proposal["id"]})
        assert not result["applied"] and result["status"] == "stale"
        assert app.read_text() == BASE + "# written by another tool\n"
    finally:
        await editor.stop()


async def test_undo_from_a_code_action_and_not_over_later_edits(editor, model, ws):
    app = ws / "src" / "app.py"
    app.write_text(BASE)
    uri = editor.open(app)
    proposal = await _propose(editor, model)
    assert (await editor.command("talos.proposal.apply", {"proposal_id": proposal["id"]}))[
        "applied"
    ]
    (undo,) = [a for a in await _actions(editor, uri, 0) if a.title.startswith("Undo")]
    assert undo.title == f"Undo {proposal['id']}"
    assert (await _run(editor, undo))["status"] == "undone"
    assert editor.texts[uri] == BASE
    second = await _propose(editor, model)
    await editor.command("talos.proposal.apply", {"proposal_id": second["id"]})
    editor.type(uri, editor.texts[uri] + "# mine\n")
    with pytest.raises(Exception, match="changed after proposal"):
        await editor.command("talos.undo", {"proposal_id": second["id"]})
    assert editor.texts[uri].endswith("# mine\n")


async def test_a_restarted_server_applies_what_the_last_one_proposed_once(
    tmp_path, ws, options, model
):
    app = ws / "src" / "app.py"
    app.write_text(BASE)
    first = await start_editor(tmp_path / "home", [ws], options)
    proposal = await _propose(first, model)
    await first.stop()
    second = await start_editor(tmp_path / "home", [ws], options)
    try:
        (listed,) = await second.command("talos.proposal.list", {})
        assert listed["id"] == proposal["id"] and listed["status"] == "pending"
        assert (await second.command("talos.proposal.apply", {"proposal_id": listed["id"]}))[
            "applied"
        ]
        assert app.read_text() == BASE.replace("return 1", "return 10").replace("n 2", "n 20")
        again = await second.command("talos.proposal.apply", {"proposal_id": listed["id"]})
        assert not again["applied"] and again["status"] == "applied"
    finally:
        await second.stop()


async def test_two_servers_racing_to_apply_one_proposal_apply_it_once(tmp_path, ws, options, model):
    app = ws / "src" / "app.py"
    app.write_text(BASE)
    first = await start_editor(tmp_path / "home", [ws], options)
    second = await start_editor(tmp_path / "home2", [ws], options)
    try:
        proposal = await _propose(first, model)
        results = await asyncio.gather(
            *(
                e.command("talos.proposal.apply", {"proposal_id": proposal["id"]})
                for e in (first, second)
            )
        )
        assert sorted(r["applied"] for r in results) == [False, True]
        assert app.read_text() == BASE.replace("return 1", "return 10").replace("n 2", "n 20")
    finally:
        for editor in (first, second):
            await editor.stop()
