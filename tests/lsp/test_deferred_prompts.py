"""Deferred prompts (`initializationOptions.deferredPrompts: true`): questions and permission
prompts come as `talos/prompt` and are answered later with `talos.prompt.answer`, with the
semantics of `window/showMessageRequest` (a dismissal is never an answer; a permission
dismissal is a denial), over the real server."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from talos_ls.demo.scripted_model import reply

from ..system import require_sandbox
from .conftest import Editor, start_editor

CONFLICT = {"AGENTS.md": "- Tests use unittest\n", "CLAUDE.md": "- Tests use pytest\n"}


class Prompts:
    """What the client got: `talos/prompt` and `talos/promptClosed` notifications."""

    def __init__(self, editor: Editor) -> None:
        self.sent: list[Any] = []
        self.closed: list[Any] = []
        editor.client.feature("talos/prompt")(lambda ls, params: self.sent.append(params))
        editor.client.feature("talos/promptClosed")(lambda ls, params: self.closed.append(params))

    async def next(self, editor: Editor, count: int = 1) -> Any:
        await editor.until(lambda: len(self.sent) >= count, f"prompt {count}")
        return self.sent[count - 1]


async def deferred(tmp_path, ws, options, **more: Any) -> tuple[Editor, Prompts]:
    editor = await start_editor(
        tmp_path / "home", [ws], {**options, "deferredPrompts": True, **more}
    )
    return editor, Prompts(editor)


def tool_results(model, index: int) -> list[str]:
    return [m["content"] for m in model.requests[index]["body"]["messages"] if m["role"] == "tool"]


def run_command(command: str) -> dict:
    return reply("", [("c1", "run_command", json.dumps({"command": command}))])


async def statements(editor: Editor) -> dict[str, float]:
    return {f["statement"]: f["confidence"] for f in await editor.command("talos.memory.list", {})}


async def answer(editor: Editor, prompt_id: str, choice: str | None) -> dict[str, Any]:
    return await editor.command("talos.prompt.answer", {"prompt_id": prompt_id, "choice": choice})


async def start(editor: Editor, prompt: str) -> str:
    return (await editor.command("talos.task.start", {"prompt": prompt}))["task_id"]


async def test_a_question_comes_as_a_notification_and_is_answered_later(
    tmp_path, ws, options, model
):
    for name, text in CONFLICT.items():
        (ws / name).write_text(text)
    editor, prompts = await deferred(tmp_path, ws, options)
    try:
        model.script.append(reply("Writing tests."))
        task_id = await start(editor, "write the tests")
        prompt = await prompts.next(editor)
        await editor.finished(task_id)  # the task does not wait for the person
        assert editor.prompts == []  # no window/showMessageRequest at all
        assert prompt.kind == "question" and prompt.actions[-1] == "Skip"
        assert prompt.task_id == task_id  # asked while that task runs: shown with it
        (question,) = await editor.command("talos.questions.list", {})
        assert question["status"] == "delivered"  # open while the prompt is: not cooled
        choice = next(a for a in prompt.actions if "pytest" in a)
        answered = await answer(editor, prompt.prompt_id, choice)
        assert answered == {"prompt_id": prompt.prompt_id, "choice": choice, "dismissed": False}
        facts = await _eventually_moved(editor)
        assert facts["Tests use pytest"] > 0.5 > facts["Tests use unittest"]
        assert await editor.command("talos.questions.list", {}) == []
        assert prompts.closed == []  # answered: nothing to close
    finally:
        await editor.stop()


async def _eventually_moved(editor: Editor) -> dict[str, float]:
    for _ in range(500):
        facts = await statements(editor)
        if facts.get("Tests use pytest", 0.5) != 0.5:
            return facts
        await asyncio.sleep(0.02)
    raise AssertionError(f"the answer never moved the facts: {facts}")


@pytest.mark.parametrize("choice", [None, "Skip"])
async def test_a_dismissed_question_is_cooled_never_answered(tmp_path, ws, options, model, choice):
    for name, text in CONFLICT.items():
        (ws / name).write_text(text)
    editor, prompts = await deferred(tmp_path, ws, options)
    try:
        model.script.append(reply("ok"))
        await start(editor, "write the tests")
        prompt = await prompts.next(editor)
        answered = await answer(editor, prompt.prompt_id, choice)
        assert answered["dismissed"] is (choice is None)  # "Skip" is an action: not dismissed
        for _ in range(250):
            listed = await editor.command("talos.questions.list", {})
            if listed and listed[0]["status"] == "cooled":
                break
            await asyncio.sleep(0.02)
        assert listed[0]["status"] == "cooled"
        assert set((await statements(editor)).values()) == {0.5}  # never evidence
    finally:
        await editor.stop()


@pytest.mark.parametrize(
    "choice, outcome",
    [
        ("Allow once", "made"),
        ("Deny", "not run: denied by you"),
        (None, "not run: dismissed: denied"),
    ],
)
async def test_a_permission_prompt_answered_later(tmp_path, ws, options, model, choice, outcome):
    require_sandbox()
    editor, prompts = await deferred(tmp_path, ws, options)
    try:
        model.script += [run_command("touch made.txt && echo made"), reply("finished")]
        task_id = await start(editor, "make it")
        prompt = await prompts.next(editor)
        assert prompt.kind == "permission" and prompt.task_id == task_id
        assert prompt.message.startswith("Run this command? `touch made.txt && echo made`")
        assert prompt.actions[0] == "Allow once" and prompt.actions[-1] == "Deny"
        (task,) = [t for t in await editor.command("talos.task.list", {}) if t["id"] == task_id]
        assert task["state"] == "running"  # waiting for the person, the editor free meanwhile
        await answer(editor, prompt.prompt_id, choice)
        await editor.finished(task_id)
        assert outcome in tool_results(model, 1)[0]
        assert (ws / "made.txt").exists() == (choice == "Allow once")
    finally:
        await editor.stop()


async def test_an_unanswered_prompt_times_out_denied_and_is_closed(tmp_path, ws, options, model):
    require_sandbox()
    editor, prompts = await deferred(tmp_path, ws, options, promptTimeout=1)
    try:
        model.script += [run_command("touch made.txt"), reply("finished")]
        task_id = await start(editor, "make it")
        prompt = await prompts.next(editor)
        await editor.finished(task_id)
        assert "not run: dismissed: denied" in tool_results(model, 1)[0]
        assert not (ws / "made.txt").exists()
        (closed,) = prompts.closed
        assert (closed.prompt_id, closed.reason) == (prompt.prompt_id, "timeout")
    finally:
        await editor.stop()


async def test_a_cancelled_task_closes_its_prompt(tmp_path, ws, options, model):
    require_sandbox()
    editor, prompts = await deferred(tmp_path, ws, options)
    try:
        model.script += [run_command("touch made.txt"), reply("finished")]
        task_id = await start(editor, "make it")
        prompt = await prompts.next(editor)
        await editor.command("talos.task.cancel", {"task_id": task_id})
        await editor.finished(task_id)
        await editor.until(lambda: prompts.closed, "the prompt closed")
        assert (prompts.closed[0].prompt_id, prompts.closed[0].reason) == (
            prompt.prompt_id,
            "cancelled",
        )
        assert not (ws / "made.txt").exists()
    finally:
        await editor.stop()


async def test_without_the_option_prompts_stay_show_message_requests(editor, model, ws):
    require_sandbox()
    prompts = Prompts(editor)
    model.script += [run_command("touch made.txt"), reply("finished")]
    editor.replies.append("Deny")
    task_id = await start(editor, "make it")
    await editor.finished(task_id)
    assert len(editor.prompts) == 1 and prompts.sent == []
