"""talos-ls end to end: the real server process, a real LSP client, the scripted model."""

from __future__ import annotations

import subprocess
import sys

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from talos_ls.demo.scripted_model import hang, reply
from talos_ls.server import COMMANDS
from talos_ls.store import open_store

from .conftest import start_editor


def test_version_and_help():
    out = subprocess.run(
        [sys.executable, "-m", "talos_ls.server", "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.startswith("talos-ls ")
    bad = subprocess.run(
        [sys.executable, "-m", "talos_ls.server", "--tcp", "nonsense"],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "--tcp needs HOST:PORT" in bad.stderr


async def test_commands_are_advertised(editor):
    caps = editor.initialized.capabilities
    assert set(caps.execute_command_provider.commands) == set(COMMANDS)


async def test_a_task_reports_progress_with_cost_and_its_answer(editor, model, ws):
    # Each step streams for a while (PROGRESS_S holds a report made sooner after another)
    model.script += [
        reply(
            "Reading.",
            [("c1", "read_file", '{"path": "src/app.py"}')],
            usage=(100, 20, 0),
            delay=0.05,
        ),
        reply("main returns 1.", usage=(200, 10, 0), delay=0.05),
    ]
    started = await editor.command("talos.task.start", {"prompt": "what does main return?"})
    assert started["task_id"].startswith("t") and started["state"] in ("queued", "running")
    reports = await editor.finished(started["task_id"])
    assert isinstance(reports[0], types.WorkDoneProgressBegin) and reports[0].cancellable
    steps = [r.message for r in reports if isinstance(r, types.WorkDoneProgressReport)]
    assert any("step 1: read_file" in m for m in steps)
    assert any(m.startswith("step 2: thinking") and "120 tokens" in m for m in steps)
    assert reports[-1].message.startswith("done")
    assert "$0.0004" in reports[-1].message  # 300 in at $1, 30 out at $2 a million: $0.00036
    await editor.until(
        lambda: any("main returns 1." in m for m in editor.messages()), "the answer as a message"
    )
    shown = await editor.command("talos.task.show", {"task_id": started["task_id"]})
    assert "# Task" in shown and "what does main return?" in shown
    assert "def main():" in shown  # the tool result, fenced
    assert (await editor.task(started["task_id"]))["state"] == "done"


async def test_cancel_from_the_progress_stops_the_task(editor, model, tmp_path):
    model.script.append(hang())
    started = await editor.command("talos.task.start", {"prompt": "think forever"})
    task_id = started["task_id"]
    await editor.until(lambda: editor.progress(task_id), "the progress to begin")
    editor.client.window_work_done_progress_cancel(
        types.WorkDoneProgressCancelParams(token=f"talos/task/{task_id}")
    )
    reports = await editor.finished(task_id)
    assert reports[-1].message.startswith("cancelled")
    assert (await editor.task(task_id))["state"] == "cancelled"
    store = open_store("sqlite:///" + str(tmp_path / "talos.db"))
    assert store.task_get(task_id)["state"] == "cancelled"
    store.close()


async def test_cancel_command(editor, model):
    model.script.append(hang())
    task_id = (await editor.command("talos.task.start", {"prompt": "think"}))["task_id"]
    await editor.until(lambda: editor.progress(task_id), "the progress to begin")
    assert (await editor.command("talos.task.cancel", {"task_id": task_id}))["cancelled"]
    await editor.finished(task_id)
    assert (await editor.task(task_id))["state"] == "cancelled"


async def test_the_cost_cap_stops_a_task(tmp_path, ws, options, model):
    editor = await start_editor(tmp_path / "home", [ws], {**options, "maxCost": 0.001})
    try:
        call = ("c{}", "read_file", '{"path": "src/app.py"}')
        model.script += [
            reply("", [(call[0].format(i), *call[1:])], usage=(400, 100, 0)) for i in range(10)
        ]
        task_id = (await editor.command("talos.task.start", {"prompt": "loop"}))["task_id"]
        reports = await editor.finished(task_id)
        assert reports[-1].message.startswith("stopped")
        task = await editor.task(task_id)
        assert task["state"] == "stopped" and "cost" in task["error"]
        assert len(model.requests) == 2  # $0.0006 a step: the second step crossed $0.001
        await editor.until(lambda: any("stopped" in m for m in editor.messages()), "a warning")
    finally:
        await editor.stop()


@pytest.mark.parametrize(
    "arguments, field",
    [
        ([], "'prompt' is required"),
        (["a string"], "one object argument"),
        ([{"prompt": 5}], "'prompt' must be a string"),
        ([{"prompt": "x", "uri": "http://example.com/a.py"}], "file:// URI"),
        ([{"prompt": "x", "range": {"start": 1}}], "'range' must be an LSP range"),
        ([{"prompt": "x"}, {"prompt": "y"}], "one object argument, got 2"),
        ([{"prompt": "   "}], "'prompt' is empty"),
    ],
)
async def test_malformed_params_are_errors_naming_the_field(editor, arguments, field):
    with pytest.raises(JsonRpcException) as caught:
        await editor.command("talos.task.start", *arguments)
    assert caught.value.code == -32602 and field in caught.value.message
    assert "settings" in await editor.command("talos.status", {})  # still serving


async def test_every_command_refuses_a_missing_field(editor):
    for name, field in [
        ("talos.task.cancel", "task_id"),
        ("talos.task.show", "task_id"),
        ("talos.proposal.show", "proposal_id"),
        ("talos.proposal.apply", "proposal_id"),
        ("talos.proposal.reject", "proposal_id"),
        ("talos.question.answer", "candidate_id"),
        ("talos.memory.remember", "statement"),
        ("talos.memory.forget", "key"),
    ]:
        with pytest.raises(JsonRpcException) as caught:
            await editor.command(name, {})
        assert caught.value.code == -32602 and f"'{field}' is required" in caught.value.message
    with pytest.raises(JsonRpcException):
        await editor.command("talos.no.such.command", {})
    assert (await editor.command("talos.task.list", {})) == []


async def test_status_reports_the_session(editor, model, ws):
    model.script.append(reply("ok", usage=(1000, 500, 0)))
    task_id = (await editor.command("talos.task.start", {"prompt": "hello"}))["task_id"]
    await editor.finished(task_id)
    status = await editor.until(
        lambda: (s := editor.last_status()) and s.tokens_in == 1000 and not s.running and s,
        "a status with the tokens",
    )
    assert status.tokens_out == 500 and status.cost_session == "0.002"
    (folder,) = status.folders
    assert folder.root == str(ws.resolve()) and folder.turn == 1
    assert folder.open_questions == 0 and folder.index.ready
    assert folder.sandbox.available in (True, False)
    assert status.store.available and status.store.url.startswith("sqlite:///")
    pulled = await editor.command("talos.status", {})
    assert pulled["tokens_in"] == 1000 and pulled["settings"]["model"] == "fake-model"


async def test_running_tasks_show_in_the_status(editor, model):
    model.script.append(hang())
    task_id = (await editor.command("talos.task.start", {"prompt": "wait"}))["task_id"]
    status = await editor.until(
        lambda: (s := editor.last_status()) and s.running and s, "a running task"
    )
    (running,) = status.running  # first seen queued, starting or at its first step
    assert running.id == task_id and (
        running.step in ("queued", "starting") or running.step.startswith("step 1")
    ), running
    await editor.until(
        lambda: editor.last_status().running[0].step.startswith("step 1"),
        "its first step in the status",
    )
    await editor.command("talos.task.cancel", {"task_id": task_id})
    await editor.finished(task_id)


async def test_remember_and_forget_take_the_same_path_as_the_terminal(editor):
    """`talos.memory.remember` reads the statement's slot as `talos memory add` does, so the
    person's word is reconciled with what else is held on it; `talos.memory.forget` takes the
    start of a key a list showed, as `talos memory forget` does, and refuses an ambiguous one."""
    first = await editor.command("talos.memory.remember", {"statement": "Tests use pytest"})
    assert first["outcome"] == "alone"  # a slot: ('Tests', 'use', 'pytest')
    later = await editor.command("talos.memory.remember", {"statement": "Tests use nose"})
    assert later["outcome"] not in ("alone", "no slot")  # met the first on its slot
    with pytest.raises(JsonRpcException, match=r"facts start with ''|no fact ''"):
        await editor.command("talos.memory.forget", {"key": ""})
    forgot = await editor.command("talos.memory.forget", {"key": first["key"][:10]})
    assert forgot == {"key": first["key"], "retracted": True}


async def test_remembering_a_fact_twice_holds_it_once(editor):
    first = await editor.command("talos.memory.remember", {"statement": "Tests use pytest"})
    again = await editor.command("talos.memory.remember", {"statement": "tests use pytest."})
    assert first["outcome"] != "already held"
    assert again == {"key": first["key"], "outcome": "already held"}
    held = [
        f
        for f in await editor.command("talos.memory.list", {})
        if f["statement"].lower().startswith("tests use pytest")
    ]
    assert len(held) == 1
