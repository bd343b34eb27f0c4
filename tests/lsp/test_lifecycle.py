"""Settings, workspace folders, shutdown, and a loop that stays responsive, end to end."""

from __future__ import annotations

import asyncio
import json

from lsprotocol import types

from talos_ls.demo.scripted_model import hang, reply, trickle
from talos_ls.store import open_store

from .conftest import WAIT_S, start_editor


def _refusals(editor):
    return [m for m in editor.messages() if m.startswith("Talos setting refused")]


async def test_a_configuration_change_is_applied_and_a_bad_value_refused(editor, model):
    bad = {"maxSteps": 0, "model": "other-model", "permissionMode": "yolo"}
    editor.client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"talos": bad})
    )
    refused = await editor.until(
        lambda: len(_refusals(editor)) >= 2 and _refusals(editor), "the refusals"
    )
    assert any(m.startswith("Talos setting refused: maxSteps:") for m in refused)
    assert any("permissionMode: must be one of" in m for m in refused)
    settings = (await editor.command("talos.status", {}))["settings"]
    assert settings["model"] == "other-model"  # the good value applied
    assert settings["maxSteps"] == 50 and settings["permissionMode"] == "ask"  # last good
    model.script.append(reply("ok"))
    task_id = (await editor.command("talos.task.start", {"prompt": "hi"}))["task_id"]
    await editor.finished(task_id)
    assert model.requests[-1]["body"]["model"] == "other-model"


async def test_settings_pulled_at_start_and_a_key_in_settings_refused(tmp_path, ws, options):
    secret = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"
    editor = await start_editor(
        tmp_path / "home",
        [ws],
        {**options, "apiKey": secret},
        configuration={"maxCost": "lots", "questionBudgetTurns": 2, "apiKeyEnv": secret},
    )
    try:
        refused = await editor.until(
            lambda: len(_refusals(editor)) >= 3 and _refusals(editor), "the refusals"
        )
        assert any("apiKey: the key never goes in settings" in m for m in refused)
        assert any("maxCost: must be" in m for m in refused)
        assert any("apiKeyEnv: must be the NAME of an environment variable" in m for m in refused)
        assert not any(secret in m for m in editor.messages())
        status = await editor.command("talos.status", {})
        assert status["settings"]["questionBudgetTurns"] == 2
        assert status["settings"]["apiKeyEnv"] == "OPENAI_API_KEY"
    finally:
        await editor.stop()


async def test_shutdown_cancels_a_running_task_and_exits(tmp_path, ws, options, model):
    editor = await start_editor(tmp_path / "home", [ws], options)
    model.script.append(hang())
    task_id = (await editor.command("talos.task.start", {"prompt": "wait"}))["task_id"]
    await editor.until(lambda: editor.progress(task_id), "the task to run")
    await editor.stop()
    assert editor.client._server.returncode == 0
    store = open_store(options["storeUrl"])
    assert store.task_get(task_id)["state"] == "cancelled"
    store.close()


async def test_two_folders_two_hosts(tmp_path, options, model):
    roots = []
    for name in ("one", "two", "three"):
        root = tmp_path / name
        root.mkdir()
        (root / f"{name}.py").write_text("x = 1\n")
        roots.append(root)
    editor = await start_editor(tmp_path / "home", roots[:2], options)
    try:
        status = await editor.until(
            lambda: (s := editor.last_status()) and len(s.folders) == 2 and s, "two folders"
        )
        assert {f.root for f in status.folders} == {str(r.resolve()) for r in roots[:2]}
        model.script.append(reply("ok"))
        uri = (roots[1] / "two.py").as_uri()
        task_id = (await editor.command("talos.task.start", {"prompt": "look", "uri": uri}))[
            "task_id"
        ]
        await editor.finished(task_id)
        assert (await editor.task(task_id))["folder"] == str(roots[1].resolve())
        await editor.command("talos.memory.remember", {"statement": "Two uses tabs", "uri": uri})
        assert await editor.command("talos.memory.list", {"uri": roots[0].as_uri()}) == []
        assert len(await editor.command("talos.memory.list", {"uri": uri})) == 1
        editor.client.workspace_did_change_workspace_folders(
            types.DidChangeWorkspaceFoldersParams(
                event=types.WorkspaceFoldersChangeEvent(
                    added=[types.WorkspaceFolder(uri=roots[2].as_uri(), name="three")],
                    removed=[types.WorkspaceFolder(uri=roots[0].as_uri(), name="one")],
                )
            )
        )
        status = await editor.until(
            lambda: (
                (s := editor.last_status())
                and {f.root for f in s.folders} == {str(r.resolve()) for r in roots[1:]}
                and s
            ),
            "the folders changed",
        )
        outside = (roots[0] / "one.py").as_uri()
        try:
            await editor.command("talos.task.start", {"prompt": "x", "uri": outside})
        except Exception as exc:
            assert "outside every workspace folder" in str(exc)
        else:
            raise AssertionError("a removed folder still served")
    finally:
        await editor.stop()


def _generate(root, files):
    for i in range(files):
        d = root / f"pkg{i % 50}" / f"mod{i % 400}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"file{i}.py").write_text(f"def f{i}():\n    return {i}\n\nclass C{i}:\n    pass\n")


async def test_the_loop_answers_while_a_turn_prepares_and_three_tasks_stream(
    tmp_path, options, model
):
    """Three tasks stream (they never finish until cancelled: no race with the clock, however
    busy the machine) while a fourth turn prepares over 20,000 files: the editor's requests
    are answered all the while."""
    root = tmp_path / "big"
    _generate(root, 20_000)
    editor = await start_editor(tmp_path / "home", [root], options)
    try:
        doc = root / "pkg0" / "mod0" / "file0.py"
        editor.client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(
                    uri=doc.as_uri(), language_id="python", version=1, text=doc.read_text()
                )
            )
        )
        model.script += [*(trickle(0.05, "x" * 7) for _ in range(3)), reply("the fourth")]
        streaming = [
            (await editor.command("talos.task.start", {"prompt": f"stream {n}"}))["task_id"]
            for n in range(3)
        ]
        await editor.until(lambda: len(model.requests) == 3, "the three tasks streaming")
        fourth = asyncio.ensure_future(
            editor.command(
                "talos.task.start",
                {
                    "prompt": "explain the parser and load_config()",
                    "uri": doc.as_uri(),
                    "range": {
                        "start": {"line": 0, "character": 0},
                        "end": {"line": 1, "character": 0},
                    },
                },
            )
        )
        actions = await asyncio.wait_for(
            editor.client.text_document_code_action_async(
                types.CodeActionParams(
                    text_document=types.TextDocumentIdentifier(uri=doc.as_uri()),
                    range=types.Range(
                        start=types.Position(line=0, character=0),
                        end=types.Position(line=1, character=0),
                    ),
                    context=types.CodeActionContext(diagnostics=[]),
                )
            ),
            WAIT_S,
        )
        assert [a.title for a in actions] == ["Ask Talos about the selection"]
        states = {t["id"]: t["state"] for t in await editor.command("talos.task.list", {})}
        assert [states[t] for t in streaming] == ["running"] * 3
        task_id = (await fourth)["task_id"]
        assert task_id not in streaming
        await editor.finished(task_id)
        assert (await editor.task(task_id))["state"] == "done"
        for t in streaming:
            await editor.command("talos.task.cancel", {"task_id": t})
            await editor.finished(t)
        first = next(r for r in model.requests if "the parser" in json.dumps(r["body"]))
        assert "Selected text" in json.dumps(first["body"])  # the editor's context went along
    finally:
        await editor.stop()


async def test_two_daemons_on_one_workspace_share_the_turn_counter(tmp_path, ws, options, model):
    first = await start_editor(tmp_path / "home", [ws], options)
    second = await start_editor(tmp_path / "home2", [ws], options)
    try:
        for n, editor in enumerate((first, second, first), 1):
            model.script.append(reply("ok"))
            started = await editor.command("talos.task.start", {"prompt": f"turn {n}"})
            assert started["turn"] == n  # one counter for the workspace, in the store
            await editor.finished(started["task_id"])
    finally:
        await first.stop()
        await second.stop()


async def test_the_status_says_when_the_index_is_ready(tmp_path, options):
    root = tmp_path / "mid"
    _generate(root, 3000)  # long enough to scan that the first status comes before it ends
    editor = await start_editor(tmp_path / "home", [root], options)
    try:
        status = await editor.until(
            lambda: (s := editor.last_status()) and s.folders and s.folders[0].index.ready and s,
            "a status with the index ready",
        )
        assert status.folders[0].index.files == 3000
    finally:
        await editor.stop()


async def test_an_editor_that_watches_files_keeps_the_index_current(tmp_path, ws, options):
    from .conftest import capabilities

    editor = await start_editor(tmp_path / "home", [ws], options, caps=capabilities(watches=True))
    try:
        (registration,) = await editor.until(lambda: editor.registrations, "a registration")
        assert registration.method == "workspace/didChangeWatchedFiles"
        await editor.until(
            lambda: (s := editor.last_status()) and s.folders and s.folders[0].index.files == 1,
            "the index of one file",
        )
        assert editor.last_status().folders[0].index.watched_by == "editor"  # not us as well
        new = ws / "src" / "parser.py"
        new.write_text("def parse():\n    pass\n")
        event = types.FileEvent(uri=new.as_uri(), type=types.FileChangeType.Created)
        editor.client.workspace_did_change_watched_files(
            types.DidChangeWatchedFilesParams(changes=[event])
        )
        await editor.until(
            lambda: (s := editor.last_status()) and s.folders[0].index.files == 2,
            "the new file indexed",
        )
    finally:
        await editor.stop()
