"""Permission prompts and questions through `window/showMessageRequest`, end to end."""

from __future__ import annotations

import json

import pytest

from talos_ls.demo.scripted_model import reply

from ..system import as_ordinary_user, path_without, require_sandbox
from .conftest import start_editor


def _tool_results(model, index):
    return [m["content"] for m in model.requests[index]["body"]["messages"] if m["role"] == "tool"]


def _run(command):
    return reply("", [("c1", "run_command", json.dumps({"command": command}))])


@pytest.mark.parametrize(
    "answer, outcome",
    [
        ("Allow once", "made"),
        ("Deny", "not run: denied by you"),
        (None, "not run: dismissed: denied"),
    ],
)
async def test_permission_prompt(editor, model, ws, answer, outcome):
    require_sandbox()
    model.script += [_run("touch made.txt && echo made"), reply("finished")]
    editor.replies.append(answer)
    task_id = (await editor.command("talos.task.start", {"prompt": "make it"}))["task_id"]
    await editor.finished(task_id)
    (prompt,) = editor.prompts
    assert prompt.message.startswith("Run this command? `touch made.txt && echo made` (in the")
    assert prompt.actions[0].title == "Allow once"
    assert outcome in _tool_results(model, 1)[0]
    assert (ws / "made.txt").exists() == (answer == "Allow once")


async def test_always_allow_saves_the_rule_and_stops_asking(editor, model, ws, tmp_path):
    require_sandbox()
    model.script += [_run("touch made.txt"), reply("one"), _run("touch made.txt"), reply("two")]
    editor.replies.append(editor.button("Always allow"))
    first = (await editor.command("talos.task.start", {"prompt": "make it"}))["task_id"]
    await editor.finished(first)
    assert "Always allow `touch made.txt`" in [a.title for a in editor.prompts[0].actions]
    saved = list((tmp_path / "home" / "config" / "talos" / "workspaces").glob("*.json"))
    assert json.loads(saved[0].read_text())["commands"]["allow"] == ["touch made.txt"]
    second = (await editor.command("talos.task.start", {"prompt": "again"}))["task_id"]
    await editor.finished(second)
    assert len(editor.prompts) == 1  # not asked again
    assert "not run" not in _tool_results(model, 3)[0]


CONFLICT = {"AGENTS.md": "- Tests use unittest\n", "CLAUDE.md": "- Tests use pytest\n"}


def _conflicted(ws):
    for name, text in CONFLICT.items():
        (ws / name).write_text(text)


async def _statements(editor):
    facts = await editor.command("talos.memory.list", {})
    return {f["statement"]: f["confidence"] for f in facts}


async def test_a_question_is_answered_and_moves_the_facts(tmp_path, ws, options, model):
    _conflicted(ws)
    editor = await start_editor(tmp_path / "home", [ws], options)
    try:
        editor.replies.append(editor.button("pytest"))
        model.script.append(reply("Writing tests.", delay=0.05))
        task_id = (await editor.command("talos.task.start", {"prompt": "write the tests"}))[
            "task_id"
        ]
        await editor.finished(task_id)
        (prompt,) = editor.prompts
        titles = [a.title for a in prompt.actions]
        assert titles[-1] == "Skip" and any("pytest" in t for t in titles)
        facts = await _statements(editor)
        assert facts["Tests use pytest"] > 0.5 > facts["Tests use unittest"]
        assert await editor.command("talos.questions.list", {}) == []
    finally:
        await editor.stop()


@pytest.mark.parametrize("dismissal", [None, "Skip"])
async def test_a_dismissal_cools_the_question_and_it_is_not_asked_again(
    tmp_path, ws, options, model, dismissal
):
    _conflicted(ws)
    editor = await start_editor(tmp_path / "home", [ws], {**options, "questionBudgetTurns": 1})
    try:
        editor.replies.append(dismissal)
        for _ in range(3):
            model.script.append(reply("ok"))
            task_id = (await editor.command("talos.task.start", {"prompt": "write the tests"}))[
                "task_id"
            ]
            await editor.finished(task_id)
        assert len(editor.prompts) == 1  # cooled: not re-asked before its cooldown
        assert set((await _statements(editor)).values()) == {0.5}  # never evidence
        status = await editor.command("talos.status", {})
        assert status["folders"][0]["turn"] == 3
    finally:
        await editor.stop()


async def test_a_client_without_prompts_gets_none_and_answers_by_command(
    tmp_path, ws, options, model
):
    from .conftest import capabilities

    require_sandbox()
    _conflicted(ws)
    editor = await start_editor(tmp_path / "home", [ws], options, caps=capabilities(prompts=False))
    try:
        model.script += [_run("touch made.txt"), reply("done")]
        task_id = (await editor.command("talos.task.start", {"prompt": "write the tests"}))[
            "task_id"
        ]
        await editor.finished(task_id)
        assert editor.prompts == []
        assert "nobody is there to ask" in _tool_results(model, 1)[0]  # headless rules
        assert not (ws / "made.txt").exists()
        (question,) = [
            q
            for q in await editor.command("talos.questions.list", {})
            if q["kind"] == "disjunction"
        ]
        label = next(o for o in question["options"] if "pytest" in o)
        answered = await editor.command(
            "talos.question.answer", {"candidate_id": question["candidate_id"], "answer": label}
        )
        assert answered["applied"]
        facts = await _statements(editor)
        assert facts["Tests use pytest"] > 0.5 > facts["Tests use unittest"]
    finally:
        await editor.stop()


async def test_without_bwrap_the_editor_is_told_once_and_every_command_is_asked(
    tmp_path, ws, options, model, monkeypatch
):
    """bwrap hidden from the server's PATH (not skipped): one warning for the session, the
    status says so, and even in full-auto a command is asked, with no "Always allow", in a
    prompt that says it runs WITHOUT a sandbox; dismissed, it does not run. Approved, it runs
    unconfined, and still cannot read the key in the server's `/proc/<pid>/environ`
    (PR_SET_DUMPABLE; as root the server runs with no capabilities, as an ordinary user)."""
    monkeypatch.setenv("PATH", path_without(tmp_path, "bwrap"))
    settings = options | {"permissionMode": "full-auto"}
    editor = await start_editor(tmp_path / "home", [ws], settings, prefix=as_ordinary_user())
    try:
        for n in range(2):
            model.script += [_run(f"touch made{n}.txt"), reply("done")]
            editor.replies.append(None)
            task_id = (await editor.command("talos.task.start", {"prompt": "make it"}))["task_id"]
            await editor.finished(task_id)
            assert "not run: dismissed" in _tool_results(model, 2 * n + 1)[0]
        model.script += [_run("base64 -w0 /proc/$PPID/environ"), reply("done")]
        editor.replies.append("Allow once")
        task_id = (await editor.command("talos.task.start", {"prompt": "look"}))["task_id"]
        await editor.finished(task_id)
        stolen = _tool_results(model, 5)[0]
        assert "Permission denied" in stolen and "sk-test-not-a-real-key" not in stolen, stolen
        assert len(editor.prompts) == 3
        for prompt in editor.prompts:
            assert "WITHOUT a sandbox" in prompt.message, prompt.message
            assert not any("Always allow" in a.title for a in prompt.actions), prompt.actions
        notices = [m for m in editor.messages() if "Commands run without a sandbox" in m]
        assert len(notices) == 1 and "bwrap" in notices[0], editor.messages()
        assert editor.last_status().folders[0].sandbox.available is False
        assert not list(ws.glob("made*.txt"))
    finally:
        await editor.stop()
