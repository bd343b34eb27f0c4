"""SIGKILL the real talos-ls while a task streams, while a question awaits its reply, while a
permission prompt is open, and just after an apply was acknowledged; start a new server on the
same store and workspace. On SQLite and on a real redis-server (the `store_url` fixture):

- the interrupted tasks are `interrupted` (task list, task show, the store), never running for
  ever; a live server's running tasks are never marked;
- everything else the store holds is exactly as the dead server left it: facts and their
  evidence counts, the journal, question candidates, the question budget, the turn counter,
  proposals (a pending one pending, the applied one applied);
- nothing is applied twice (the file is not written again) and no answer counts twice.
"""

from __future__ import annotations

import json

from talos_ls.demo.scripted_model import hang, reply

from ..lsp.conftest import WAIT_S
from .conftest import close, durable, launch, read_store, sigkill, stored_state

CONFLICT = {"AGENTS.md": "- Tests use unittest\n", "CLAUDE.md": "- Tests use pytest\n"}


def _conflicted(ws):
    for name, text in CONFLICT.items():
        (ws / name).write_text(text)


def _evidence(url, agent):
    """Each live fact's statement → (confidence, evidence_count, corroborations,
    contradictions), from the store."""
    return read_store(
        url,
        lambda s: {
            f["statement"]: (
                f["confidence"],
                f["evidence_count"],
                f["corroborations"],
                f["contradictions"],
            )
            for f in s.fact_list(agent)
            if f["invalid_at"] is None
        },
    )


async def _start(editor, prompt="do it"):
    return (await editor.command("talos.task.start", {"prompt": prompt}))["task_id"]


async def _restart_and_check_interrupted(tmp_path, ws, options, store_url, task_id, before):
    """A new server on the same store and workspace: the task is interrupted everywhere it is
    shown, and nothing else in the store changed. Returns the new server."""
    agent = str(ws.resolve())
    editor = await launch(tmp_path / "home", ws, options)
    try:
        assert durable(store_url, agent) == before  # the restart itself changed nothing
        (listed,) = [t for t in await editor.command("talos.task.list", {}) if t["id"] == task_id]
        assert listed["state"] == "interrupted"
        assert "stopped while it ran" in listed["error"]
        shown = await editor.command("talos.task.show", {"task_id": task_id})
        assert shown.startswith(f"# Task {task_id}: interrupted")
        row = read_store(store_url, lambda s: s.task_get(task_id))
        assert row["state"] == "interrupted"
        assert read_store(store_url, lambda s: s.task_open(agent)) == []
        await editor.until(
            lambda: any("interrupted" in m for m in editor.messages()),
            "the notice of the interrupted task",
        )
        status = await editor.command("talos.status", {})
        assert status["running"] == []
        assert status["folders"][0]["turn"] == before["turn"]
    except BaseException:
        await close(editor)
        raise
    return editor


async def _next_task_runs(editor, model, before_turn):
    """The restarted server works: the next task is done, on the next turn."""
    model.script.append(reply("all good"))
    started = await editor.command("talos.task.start", {"prompt": "and now?"})
    assert started["turn"] == before_turn + 1
    await editor.finished(started["task_id"])
    assert (await editor.task(started["task_id"]))["state"] == "done"


async def test_sigkill_while_a_task_streams(tmp_path, ws, options, model, store_url):
    model.script.append(hang())  # the first chunk, then nothing: the task streams
    first = await launch(tmp_path / "home", ws, options)
    task_id = await _start(first, "explain the parser")
    await first.until(lambda: model.requests, "the model's request")
    await stored_state(store_url, task_id, "running")
    await sigkill(first)
    before = durable(store_url, str(ws.resolve()))
    assert before["turn"] == 1
    editor = await _restart_and_check_interrupted(tmp_path, ws, options, store_url, task_id, before)
    try:
        # its transcript holds what was stored before the kill; its title survives
        (listed,) = [t for t in await editor.command("talos.task.list", {}) if t["id"] == task_id]
        assert listed["title"] == "explain the parser"
        await _next_task_runs(editor, model, before["turn"])
    finally:
        await close(editor)


async def test_sigkill_while_a_question_awaits_its_reply(tmp_path, ws, options, model, store_url):
    _conflicted(ws)
    agent = str(ws.resolve())
    model.script.append(hang())
    first = await launch(tmp_path / "home", ws, options, hold=True)
    task_id = await _start(first, "write the tests")
    await first.until(lambda: first.prompts, "the question")
    assert first.prompts[0].actions[-1].title == "Skip"
    await stored_state(store_url, task_id, "running")
    await sigkill(first)
    before = durable(store_url, agent)
    (asked,) = [c for c in before["candidates"] if c["status"] == "delivered"]
    assert before["last_delivery"] == 1 == before["turn"]  # the budget was spent on turn 1
    counts = _evidence(store_url, agent)
    editor = await _restart_and_check_interrupted(tmp_path, ws, options, store_url, task_id, before)
    try:
        # the question is still open and can be answered, once
        (open_q,) = await editor.command("talos.questions.list", {})
        assert open_q["candidate_id"] == asked["candidate_id"]
        label = next(o for o in open_q["options"] if "pytest" in o)
        args = {"candidate_id": asked["candidate_id"], "answer": label}
        assert (await editor.command("talos.question.answer", args))["applied"]
        once = _evidence(store_url, agent)
        assert once != counts
        assert once["Tests use pytest"][0] > 0.5 > once["Tests use unittest"][0]
        again = await editor.command("talos.question.answer", args)
        assert not again["applied"]
        assert _evidence(store_url, agent) == once  # not counted twice
        assert durable(store_url, agent)["last_delivery"] == 1
    finally:
        await close(editor)


async def test_sigkill_while_a_permission_prompt_is_open(tmp_path, ws, options, model, store_url):
    command = json.dumps({"command": "touch made.txt"})
    model.script += [reply("", [("c1", "run_command", command)]), reply("ran it")]
    first = await launch(tmp_path / "home", ws, options, hold=True)
    task_id = await _start(first, "make it")
    await first.until(lambda: first.prompts, "the permission prompt")
    assert "`touch made.txt`" in first.prompts[0].message.splitlines()[0]
    await stored_state(store_url, task_id, "running")
    await sigkill(first)
    before = durable(store_url, str(ws.resolve()))
    editor = await _restart_and_check_interrupted(tmp_path, ws, options, store_url, task_id, before)
    try:
        assert not (ws / "made.txt").exists()  # never allowed, never run
        rules = tmp_path / "home" / "config" / "talos" / "workspaces"
        assert not any("touch" in p.read_text() for p in rules.glob("*.json"))
        model.script.clear()
        await _next_task_runs(editor, model, before["turn"])
    finally:
        await close(editor)


async def test_sigkill_just_after_an_apply_was_acknowledged(
    tmp_path, ws, options, model, store_url
):
    _conflicted(ws)
    agent = str(ws.resolve())
    edit_app = json.dumps(
        {"path": "src/app.py", "blocks": [{"search": "return 1", "replace": "return 2"}]}
    )
    edit_util = json.dumps({"path": "src/util.py", "content": "X = 2\n"})
    model.script += [
        reply("", [("c1", "propose_edit", edit_app), ("c2", "propose_edit", edit_util)]),
        reply("proposed", delay=0.05),
    ]
    first = await launch(tmp_path / "home", ws, options)
    first.replies.append(first.button("pytest"))  # the question is answered
    task_id = await _start(first, "write the tests")
    await first.finished(task_id)
    await first.until(
        lambda: (e := _evidence(store_url, agent)) and e["Tests use pytest"][0] > 0.5,
        "the answer recorded",
    )
    answered = _evidence(store_url, agent)
    proposals = {p["path"]: p for p in await first.command("talos.proposal.list", {})}
    assert {p["status"] for p in proposals.values()} == {"pending"}
    app, util = proposals["src/app.py"]["id"], proposals["src/util.py"]["id"]
    result = await first.command("talos.proposal.apply", {"proposal_id": app})
    assert result == {"proposal_id": app, "applied": True, "status": "applied"}
    target = ws / "src" / "app.py"
    written = target.stat()
    await sigkill(first)  # at once: nothing more of the first server's is awaited
    assert target.read_text() == "def main():\n    return 2\n"
    before = durable(store_url, agent)
    assert {p["id"]: p["status"] for p in before["proposals"]} == {app: "applied", util: "pending"}
    assert read_store(store_url, lambda s: s.task_get(task_id))["state"] == "done"
    editor = await launch(tmp_path / "home", ws, options)
    try:
        assert durable(store_url, agent) == before
        assert _evidence(store_url, agent) == answered  # the answer counted once, still
        listed = {p["id"]: p["status"] for p in await editor.command("talos.proposal.list", {})}
        assert listed == {app: "applied", util: "pending"}
        # a finished task is not marked
        assert read_store(store_url, lambda s: s.task_get(task_id))["state"] == "done"
        again = await editor.command("talos.proposal.apply", {"proposal_id": app})
        assert again == {"proposal_id": app, "applied": False, "status": "applied"}
        after = target.stat()
        assert (after.st_ino, after.st_mtime_ns, after.st_size) == (
            written.st_ino,
            written.st_mtime_ns,
            written.st_size,
        )  # never written again
        assert target.read_text() == "def main():\n    return 2\n"
        assert await editor.command("talos.questions.list", {}) == []  # answered stays answered
        assert _evidence(store_url, agent) == answered
        # the pending one is still to review, and applies
        applied = await editor.command("talos.proposal.apply", {"proposal_id": util})
        assert applied["applied"] and (ws / "src" / "util.py").read_text() == "X = 2\n"
    finally:
        await close(editor)


async def test_a_live_servers_running_task_is_never_marked(tmp_path, ws, options, model, store_url):
    """Two servers on one workspace: the second one's start leaves the first one's running
    task alone; once the first is killed, the live one marks it at its next renewal."""
    agent = str(ws.resolve())
    model.script.append(hang())
    first = await launch(tmp_path / "home", ws, options)
    second = None
    try:
        task_id = await _start(first, "a long one")
        await stored_state(store_url, task_id, "running")
        second = await launch(tmp_path / "home", ws, options)  # its recovery has run
        assert read_store(store_url, lambda s: s.task_get(task_id))["state"] == "running"
        assert (await first.task(task_id))["state"] == "running"
        assert task_id not in [t["id"] for t in await second.command("talos.task.list", {})]
        await sigkill(first)
        # the second server renews its lease every 15 s and recovers then: no restart needed
        await second.until(
            lambda: any("interrupted" in m for m in second.messages()),
            "the live server noticing the dead one",
            timeout=WAIT_S * 4,
        )
        (listed,) = [t for t in await second.command("talos.task.list", {}) if t["id"] == task_id]
        assert listed["state"] == "interrupted"
        assert read_store(store_url, lambda s: s.task_open(agent)) == []
    finally:
        await close(first)
        if second is not None:
            await close(second)
