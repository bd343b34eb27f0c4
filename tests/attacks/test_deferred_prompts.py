"""Deferred prompts under attack: `talos.prompt.answer` with a forged prompt id, a choice that is
none of the prompt's actions, a second answer, an answer after the timeout; and a hostile
model's prompt text reaching the client through `talos/prompt` escaped, as through
`window/showMessageRequest`.

Each permission test runs a command the person must allow and checks what ran and what was
saved: a test fails when the defence is removed (an answer taken twice, a made-up choice taken
as "Allow", a late answer honoured).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from talos_ls.demo.scripted_model import reply
from talos_ls.gates.permissions import workspace_settings_path

from ..lsp.conftest import Editor, start_editor
from ..lsp.test_deferred_prompts import Prompts, answer, start
from ..system import require_sandbox
from .test_lsp import SPOOFED_COMMANDS, assert_plain, calls, model, options, refused, ws

__all__ = ["model", "options", "ws"]  # the LSP suite's fixtures


def tool_results(model) -> list[str]:
    return [m["content"] for m in model.requests[1]["body"]["messages"] if m["role"] == "tool"]


async def permission_prompt(tmp_path, ws, options, model, **more) -> tuple[Editor, Prompts, str]:
    """A deferred-prompts editor whose task waits on the permission to `touch pwned`."""
    require_sandbox()
    editor = await start_editor(
        tmp_path / "home", [ws], {**options, "deferredPrompts": True, **more}
    )
    prompts = Prompts(editor)
    model.script += [reply("", calls("run_command", {"command": "touch pwned"})), reply("done")]
    task_id = await start(editor, "make it")
    await prompts.next(editor)
    return editor, prompts, task_id


def saved_rules(tmp_path: Path, ws: Path) -> str:
    settings = workspace_settings_path(ws.resolve(), tmp_path / "home" / "config" / "talos")
    return settings.read_text() if settings.exists() else ""


async def test_a_forged_prompt_id_is_refused_and_the_real_prompt_stays_open(
    tmp_path, ws, options, model
):
    editor, prompts, task_id = await permission_prompt(tmp_path, ws, options, model)
    try:
        real = prompts.sent[0].prompt_id
        for forged in ("q0000000000000000", real + "0", real.upper(), "", "../" + real):
            await refused(
                editor,
                "talos.prompt.answer",
                {"prompt_id": forged, "choice": "Allow once"},
                "prompt_id",
            )
        assert not (ws / "pwned").exists()
        await refused(
            editor, "talos.prompt.answer", {"prompt_id": real, "choice": ["Allow once"]}, "choice"
        )
        answered = await editor.command(
            "talos.prompt.answer", {"prompt_id": real, "choice": "Deny"}
        )
        assert answered["choice"] == "Deny"  # still open after the forgeries: the person decides
        await editor.finished(task_id)
        assert "denied by you" in tool_results(model)[0]
        assert not (ws / "pwned").exists()
    finally:
        await editor.stop()


@pytest.mark.parametrize(
    "choice",
    [
        "allow once",
        "Allow once ",
        "Allow",
        "Always allow `*`",
        "Always allow `touch pwned`x",
        "Allow once\n",
        "Trust this file",
    ],
)
async def test_a_choice_that_is_no_action_is_a_denial_never_an_allow(
    tmp_path, ws, options, model, choice
):
    editor, prompts, task_id = await permission_prompt(tmp_path, ws, options, model)
    try:
        prompt = prompts.sent[0]
        assert choice not in prompt.actions
        answered = await answer(editor, prompt.prompt_id, choice)
        assert answered == {"prompt_id": prompt.prompt_id, "choice": None, "dismissed": True}
        await editor.finished(task_id)
        assert "not run: dismissed: denied" in tool_results(model)[0]
        assert not (ws / "pwned").exists()
        assert "touch pwned" not in saved_rules(tmp_path, ws) and "*" not in saved_rules(
            tmp_path, ws
        )
    finally:
        await editor.stop()


async def test_a_prompt_is_answered_once_a_second_answer_cannot_turn_deny_into_allow(
    tmp_path, ws, options, model
):
    editor, prompts, task_id = await permission_prompt(tmp_path, ws, options, model)
    try:
        prompt_id = prompts.sent[0].prompt_id
        await editor.command("talos.prompt.answer", {"prompt_id": prompt_id, "choice": "Deny"})
        await refused(
            editor,
            "talos.prompt.answer",
            {"prompt_id": prompt_id, "choice": "Allow once"},
            "prompt_id",
        )
        await editor.finished(task_id)
        assert "denied by you" in tool_results(model)[0]
        assert not (ws / "pwned").exists()
    finally:
        await editor.stop()


async def test_an_answer_after_the_timeout_is_refused_and_the_command_stays_denied(
    tmp_path, ws, options, model
):
    editor, prompts, task_id = await permission_prompt(
        tmp_path, ws, options, model, promptTimeout=1
    )
    try:
        prompt_id = prompts.sent[0].prompt_id
        await editor.finished(task_id)
        await editor.until(lambda: prompts.closed, "the prompt closed")
        await refused(
            editor,
            "talos.prompt.answer",
            {"prompt_id": prompt_id, "choice": "Allow once"},
            "prompt_id",
        )
        assert "not run: dismissed: denied" in tool_results(model)[0]
        assert not (ws / "pwned").exists()
    finally:
        await editor.stop()


async def test_a_spoofing_command_reaches_talos_prompt_escaped_on_one_line(
    tmp_path, ws, options, model
):
    require_sandbox()
    editor = await start_editor(tmp_path / "home", [ws], {**options, "deferredPrompts": True})
    prompts = Prompts(editor)
    try:
        commands = [c for c, _ in SPOOFED_COMMANDS]
        model.script += [
            reply("", calls("run_command", *({"command": c} for c in commands))),
            reply("all denied"),
        ]
        task_id = await start(editor, "tidy up")
        for n, (_, shown) in enumerate(SPOOFED_COMMANDS, 1):
            prompt = await prompts.next(editor, n)
            assert shown in prompt.message, prompt.message
            assert_plain(prompt.message, "the prompt")
            command_line = next(line for line in prompt.message.split("\n") if shown in line)
            assert_plain(command_line, "the command line", one_line=True)
            for action in prompt.actions:
                assert_plain(action, "an action", one_line=True)
            await editor.command(
                "talos.prompt.answer", {"prompt_id": prompt.prompt_id, "choice": "Deny"}
            )
        await editor.finished(task_id)
        assert not (ws / "pwned").exists()
    finally:
        await editor.stop()
