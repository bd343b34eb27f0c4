"""A client that changes what a session runs under, or reads what is not its own, against the
real `talos-ls` process (pytest-lsp's client, the scripted model):
- a running task keeps the permission mode it started with;
- `baseUrl` / `apiKeyEnv` changed mid-session take effect only once the person confirms them
  (server side: any client), and a URL with invisible or bidi characters is refused (the
  other widening settings: `test_lsp_widening.py`);
- texts the server sends for display (titles, steps, questions) are escaped;
- `talos.task.show` (and `talos show`) read only the workspace's own tasks;
- the status names the store in use, and a refused `storeUrl`;
- a multi-root trust prompt names its folder; a nested folder's deny rules bind a task of the
  folder around it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from talos_ls.demo.scripted_model import ScriptedModelServer, hang, reply
from talos_ls.gates.permissions import workspace_settings_path

from ..lsp import conftest as lsp
from ..lsp.conftest import Editor, capabilities, start_editor
from ..system import require_sandbox
from .test_lsp import INVISIBLE, assert_plain, calls, run_task, tool_results

model, ws, options, editor = lsp.model, lsp.ws, lsp.options, lsp.editor
TALOS = str(Path(sys.executable).with_name("talos"))


def change(editor: Editor, **settings: Any) -> None:
    editor.client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"talos": settings})
    )


async def started(editor: Editor) -> Editor:
    await editor.until(lambda: any(s.folders for s in editor.statuses), "the first status")
    return editor


# ====================================================== 11. a task keeps its mode
async def test_a_running_task_keeps_the_permission_mode_it_started_with(editor, model, ws):
    require_sandbox()  # without one every command is asked in every mode: nothing to see
    first, second, later = ws / "first", ws / "second", ws / "later"

    def person(params: types.ShowMessageRequestParams) -> str:
        """Confirms the raised mode (it widens: the person is asked), denies each command."""
        if "settings were changed" in params.message:
            return "Apply the new settings"
        if not editor.prompts[:-1]:
            change(editor, permissionMode="full-auto")  # sent before this reply
        return "Deny"

    editor.replies += [person] * 3
    model.script += [
        reply("", calls("run_command", {"command": f"touch {first}"})),
        reply("", calls("run_command", {"command": f"touch {second}"})),
        reply("stopped"),
    ]
    await run_task(editor, "touch them")
    asked = [p for p in editor.prompts if "Run this command" in p.message]
    assert len(asked) == 2  # the second command was asked too, in the task's mode
    assert len(editor.prompts) == 3  # and the person confirmed the new mode
    assert all(r.startswith("error: not run: denied by you") for r in tool_results(model))
    assert not first.exists() and not second.exists()
    status = await editor.command("talos.status", {})
    assert status["settings"]["permissionMode"] == "full-auto"
    model.script += [reply("", calls("run_command", {"command": f"touch {later}"})), reply("done")]
    await run_task(editor, "touch it")  # a task started now has the new mode
    assert len(editor.prompts) == 3 and later.exists()


# ===================================== 11. the endpoint and the key's variable
@pytest.fixture
def elsewhere():
    server = ScriptedModelServer()
    yield server
    server.close()


async def test_an_endpoint_change_waits_for_the_person(tmp_path, ws, options, model, elsewhere):
    editor = await started(await start_editor(tmp_path / "home", [ws], options))
    try:
        model.script += [reply("from the first"), reply("still the first")]
        elsewhere.script.append(reply("from elsewhere"))
        # A URL hiding characters: refused by name, the endpoint kept, nothing asked.
        for hidden in ("\u202e", "\u200b", "\u2066", "\x85", "\u00a0"):
            change(editor, baseUrl=elsewhere.url.replace("127.0.0.1", f"127.0.0.1{hidden}"))
            await editor.until(
                lambda: [
                    m for m in editor.messages() if "baseUrl: must not contain invisible" in m
                ],
                "the refusal",
            )
            editor.client.messages.clear()
        assert editor.prompts == []
        # A change of both: asked, naming the host and the variable; dismissed: kept.
        editor.replies.append(None)
        change(editor, baseUrl=elsewhere.url, apiKeyEnv="OTHER_TOKEN")
        (prompt,) = await editor.until(lambda: editor.prompts, "the endpoint prompt")
        assert "127.0.0.1" in prompt.message and "$OTHER_TOKEN" in prompt.message
        assert [a.title for a in prompt.actions] == [
            "Apply the new settings",
            "Keep the current ones",
        ]
        await editor.until(
            lambda: [m for m in editor.messages() if "Talos keeps" in m],
            "the notice that the endpoint is kept",
        )
        await run_task(editor, "who answers?")
        assert len(model.requests) == 1 and elsewhere.requests == []
        settings = (await editor.command("talos.status", {}))["settings"]
        assert settings["apiKeyEnv"] == "OPENAI_API_KEY" and settings["baseUrl"] == model.url
        # A look-alike host is shown in its ASCII form too; then confirmed: used.
        editor.replies.append(None)
        change(editor, baseUrl="http://\u0430pi.example:9/v1", apiKeyEnv="OTHER_TOKEN")
        await editor.until(lambda: len(editor.prompts) == 2, "the second prompt")
        assert "xn--pi-6kc.example" in editor.prompts[1].message
        assert_plain(editor.prompts[1].message, "the endpoint prompt", one_line=True)
        editor.replies.append(editor.button("Apply the new"))
        change(editor, baseUrl=elsewhere.url, apiKeyEnv="OPENAI_API_KEY")
        await editor.until(lambda: len(editor.prompts) == 3, "the third prompt")
        await editor.until(
            lambda: (s := editor.last_status()) and s.settings.baseUrl == elsewhere.url,
            "the new endpoint in the status",
        )
        await run_task(editor, "who answers now?")
        assert len(model.requests) == 1 and len(elsewhere.requests) == 1
    finally:
        await editor.stop()


async def test_a_client_that_cannot_ask_keeps_the_endpoint(tmp_path, ws, options, model):
    editor = await started(
        await start_editor(tmp_path / "home", [ws], options, caps=capabilities(prompts=False))
    )
    try:
        change(editor, baseUrl="http://127.0.0.1:9/v1", apiKeyEnv="OTHER_TOKEN")
        await editor.until(
            lambda: [m for m in editor.messages() if "Talos keeps" in m and "restart" in m],
            "the notice",
        )
        model.script.append(reply("the first still"))
        task_id = await run_task(editor, "who answers?")
        assert (await editor.task(task_id))["state"] == "done" and len(model.requests) == 1
    finally:
        await editor.stop()


# ======================================================== 11. texts for display
TRICK = "fix it\x1b[2K\r\x1b[31mAllow once\u202e\u2066txt\u2069\u200b\n\nDeny\x07\x9b"


async def test_task_titles_steps_and_questions_are_escaped_where_clients_show_them(editor, model):
    model.script.append(hang())
    started_task = await editor.command("talos.task.start", {"prompt": TRICK})
    running = await editor.until(
        lambda: (s := editor.last_status()) and s.running and s.running[0],
        "the running task in the status",
    )
    listed = await editor.task(started_task["task_id"])
    for shown in (
        running.title,
        running.step,
        listed["title"],
        listed["step"],
        json.dumps(await editor.command("talos.status", {})),
    ):
        assert not INVISIBLE.search(shown), shown
    assert listed["title"].startswith("fix it\\x1b[2K\\x0d") and "\\n\\nDeny" in listed["title"]
    # cancelled once the model has the call: one cancelled before its request left would leave
    # the hang in the script for the next task (a loaded machine did)
    await editor.until(lambda: model.requests, "the model call")
    await editor.command("talos.task.cancel", {"task_id": started_task["task_id"]})
    await editor.finished(started_task["task_id"])
    # A model's question: shown escaped in the list, and answerable as shown.
    ask = {"question": "Which one\u202e?\x1b[8m", "options": ["post\u200bgres", "sqlite\x07"]}
    model.script += [reply("", calls("ask", ask)), reply("asked")]
    await run_task(editor, "set up the database")
    (question,) = await editor.command("talos.questions.list", {})
    assert question["question"] == "Which one\\u202e?\\x1b[8m"
    assert question["options"] == ["post\\u200bgres", "sqlite\\x07"]
    answered = await editor.command(
        "talos.question.answer",
        {"candidate_id": question["candidate_id"], "answer": question["options"][1]},
    )
    assert answered["applied"], answered  # the option as shown is the option


# =================================================== 12. reads scoped to a workspace
async def test_a_task_of_another_workspace_is_not_shown(tmp_path, ws, options, model):
    other = tmp_path / "other"
    (other / "src").mkdir(parents=True)
    (other / "src" / "b.py").write_text("y = 2\n")
    mine = await started(await start_editor(tmp_path / "home", [ws], options))
    theirs = await started(await start_editor(tmp_path / "home2", [other], options))
    try:
        model.script.append(reply("the secret plan is TalosScopedMarker"))
        task_id = await run_task(mine, "the plan")
        assert "TalosScopedMarker" in await mine.command("talos.task.show", {"task_id": task_id})
        with pytest.raises(JsonRpcException) as caught:  # same store, another workspace
            await theirs.command("talos.task.show", {"task_id": task_id})
        assert caught.value.code == -32602 and "no task" in caught.value.message
        assert "TalosScopedMarker" not in caught.value.message
        assert await theirs.command("talos.task.list", {}) == []
        with pytest.raises(JsonRpcException):
            await theirs.command("talos.task.cancel", {"task_id": task_id})
    finally:
        await mine.stop()
        await theirs.stop()
    # The CLI: `talos show` of another workspace's task is refused, its own shown.
    store = options["storeUrl"]
    for where, ok in ((other, False), (ws, True)):
        shown = subprocess.run(
            [TALOS, "--store", store, "show", task_id, "--workspace", str(where)],
            capture_output=True,
            text=True,
            timeout=60,
            env=lsp.server_env(tmp_path / "home"),
        )
        assert (shown.returncode == 0) is ok, shown.stderr
        assert ("TalosScopedMarker" in shown.stdout) is ok
        listed = subprocess.run(
            [TALOS, "--store", store, "tasks", "--workspace", str(where), "--json"],
            capture_output=True,
            text=True,
            timeout=60,
            env=lsp.server_env(tmp_path / "home"),
        )
        assert [t["id"] for t in json.loads(listed.stdout)] == ([task_id] if ok else [])


# ========================================================= fragile: the store
async def test_the_status_names_the_store_in_use_and_a_refused_one(tmp_path, ws, options):
    editor = await started(await start_editor(tmp_path / "home", [ws], options))
    try:
        used = options["storeUrl"]
        change(editor, storeUrl="redis://talos:hunter2TalosPass@127.0.0.1:1/0")
        (message,) = await editor.until(
            lambda: [m for m in editor.messages() if "storeUrl" in m], "the refusal"
        )
        assert f"still using {used}" in message and "hunter2" not in message
        status = await editor.command("talos.status", {})
        assert status["store"]["url"] == used and status["store"]["available"]
        assert status["store"]["refused"].startswith("redis://talos:***@127.0.0.1:1/0")
        assert "hunter2" not in json.dumps(status)
        change(editor, storeUrl=used)  # back to the one in use: nothing refused
        await editor.until(lambda: editor.last_status().store.refused is None, "no refusal")
    finally:
        await editor.stop()


# ================================================== fragile: several folders
def ship(folder: Path, rules: dict[str, Any]) -> None:
    (folder / ".talos").mkdir(parents=True, exist_ok=True)
    (folder / ".talos" / "permissions.json").write_text(json.dumps(rules))


async def test_each_trust_prompt_names_its_folder(tmp_path, options):
    plain, tricky = tmp_path / "plain", tmp_path / "tri\u202eck\x1b[8m"
    for folder in (plain, tricky):
        ship(folder, {"commands": {"allow": ["make"]}})
    editor = await start_editor(tmp_path / "home", [plain, tricky], options)
    try:
        prompts = await editor.until(
            lambda: len(editor.prompts) == 2 and editor.prompts, "both trust prompts"
        )
        messages = sorted(p.message for p in prompts)
        for message in messages:
            assert "Trust this exact file?" in message
            assert_plain(message, "a trust prompt", one_line=True)
        assert any(str(plain) in m for m in messages)
        assert any("tri\\u202eck\\x1b[8m" in m for m in messages)
    finally:
        await editor.stop()


async def test_a_nested_folders_deny_rules_bind_a_task_of_the_folder_around_it(
    tmp_path, ws, options, model
):
    inner = ws / "inner"
    (inner / "secret").mkdir(parents=True)
    ship(inner, {"commands": {"deny": ["touch"]}})  # its own file: it may restrict
    settings = workspace_settings_path(inner.resolve(), tmp_path / "home" / "config" / "talos")
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps({"paths": {"deny": ["secret/**"]}}))  # the person's
    editor = await start_editor(tmp_path / "home", [ws, inner], options)
    try:
        await editor.until(lambda: (s := editor.last_status()) and len(s.folders) == 2, "both")
        edits = [
            {"path": "inner/secret/key.txt", "content": "x\n"},
            {"path": "inner/open.txt", "content": "y\n"},
        ]
        model.script += [
            reply("", calls("propose_edit", *edits)),
            reply("", calls("run_command", {"command": "touch inner/pwned"})),
            reply("done"),
        ]
        editor.replies += [None] * 3  # any prompt dismissed
        await run_task(editor, "edit", uri=(ws / "src" / "app.py").as_uri())  # the outer's
        results = tool_results(model)
        denied, opened, touched = results
        assert "denied by a rule" in denied, results
        assert opened.startswith("proposal "), results  # its other paths are the outer's
        assert "is denied by" in touched and "of the folder inner" in touched, results
        assert not (inner / "pwned").exists()
        assert [p["path"] for p in await editor.command("talos.proposal.list", {})] == [
            "inner/open.txt"
        ]
        assert not [p for p in editor.prompts if "touch" in p.message]  # denied, not asked
    finally:
        await editor.stop()
