"""The shell reader's payloads (`shell_reader_payloads`) through the real `talos-ls`, driven by
a real LSP client, in the default mode and in full-auto, as the current user and (as root)
with no capabilities. Whatever the reader cannot vouch for is a permission prompt, which the
person dismisses: nothing hidden runs, nothing outside is read, and ordinary work runs
without a prompt."""

from __future__ import annotations

import asyncio
import json

import pytest

from talos_ls.demo.scripted_model import reply
from talos_ls.gates.permissions import workspace_settings_path

from ..lsp import conftest as lsp
from ..lsp.conftest import start_editor
from ..system import as_ordinary_user, require_sandbox
from . import shell_reader_payloads as p
from .test_lsp import run_task, tool_results

model, ws, options = lsp.model, lsp.ws, lsp.options
MAX_CALLS = 16  # tool calls the agent runs per model response
NO_SANDBOX = "WITHOUT a sandbox"


def script(model, commands: list[str]) -> None:
    calls = [(f"c{i}", "run_command", json.dumps({"command": c})) for i, c in enumerate(commands)]
    for start in range(0, len(calls), MAX_CALLS):
        model.script.append(reply("", calls[start : start + MAX_CALLS]))
    model.script.append(reply("done"))


@pytest.mark.parametrize("user", ["current user", "no capabilities"])
@pytest.mark.parametrize("mode", ["ask", "full-auto"])
async def test_the_editor_is_asked_for_every_hidden_command_and_none_runs(
    tmp_path, ws, options, model, mode, user
):
    require_sandbox()
    p.seed(ws)
    home = tmp_path / "home"
    settings = workspace_settings_path(ws.resolve(), home / "config" / "talos")
    settings.parent.mkdir(parents=True, exist_ok=True)
    if mode == "ask":
        rules, payloads = {"allow": p.PERSON_ALLOWS}, p.sample(p.default_mode_payloads())
    else:
        rules, payloads = {"ask": ["touch"]}, p.sample(p.full_auto_payloads())
    controls = p.CONTROLS[:2]
    settings.write_text(json.dumps({"commands": rules}))
    prefix = as_ordinary_user() if user == "no capabilities" else []
    editor = await start_editor(home, [ws], options | {"permissionMode": mode}, prefix=prefix)
    try:
        script(model, [*controls, *payloads])
        await run_task(editor, "do the task")
        results = tool_results(model)
        assert len(results) == len(controls) + len(payloads), results
        unsandboxed = all(NO_SANDBOX in prompt.message for prompt in editor.prompts)
        if user == "no capabilities" and unsandboxed and len(editor.prompts) == len(results):
            asked = payloads = [*controls, *payloads]  # no sandbox for it here: all asked
        else:
            assert all(r.startswith("exit code") for r in results[: len(controls)]), results
            results = results[len(controls) :]
            asked = payloads
        bad = p.problems(payloads, results)
        assert not bad, "ran without a prompt:\n" + "\n".join(bad)
        assert all("not run: dismissed" in r for r in results), results
        assert len(editor.prompts) == len(asked)  # each asked once, nothing else
        assert p.markers(ws) == []
    finally:
        await editor.stop()


async def test_the_server_answers_while_a_hostile_command_is_being_checked(
    tmp_path, ws, options, model
):
    """The review's A4: the permission check (the parse, the path checks, a glob's walk) ran
    on the event loop, so a hostile command froze every answer of the language server. Now it
    runs in the host's worker threads, and the task's step says so meanwhile ("checking the
    command"): a `talos.status` the server answers shows that step only if it answered while
    the check ran (a check on the event loop starts and ends between two answers). The
    editor asks for the status over and over from the start, so however busy the machine,
    some request is waiting when the check (a glob over a link loop, two thousand deep
    paths, each resolved) runs."""
    loop = ws / "loop"
    loop.mkdir()
    for i in range(20):
        (loop / f"l{i}").symlink_to(".")
    deep = "/".join(["d"] * 100)
    (ws / deep).mkdir(parents=True)
    command = "ls loop/*/*/*/*/*/*/zz* " + " ".join(f"{deep}/f{i}" for i in range(2000))
    script(model, [command])
    editor = await start_editor(tmp_path / "home", [ws], options | {"permissionMode": "ask"})
    steps: list[str] = []

    async def ask_status() -> None:
        while not editor.prompts:
            status = await editor.command("talos.status", {})
            steps.extend(t["step"] for t in status["running"])

    try:
        editor.replies = [None]  # the person dismisses the prompt
        askers = [asyncio.create_task(ask_status()) for _ in range(2)]
        try:
            started = await editor.command("talos.task.start", {"prompt": "list them"})
            await editor.until(lambda: editor.prompts, "the permission prompt")
            await asyncio.gather(*askers)
        finally:
            for asker in askers:
                asker.cancel()
        assert "step 1: run_command: checking the command" in steps, (
            "no status answered while the command was checked: the check held the event loop"
            f"; steps seen: {sorted(set(steps))}"
        )
        await editor.finished(started["task_id"])
        assert len(editor.prompts) == 1, editor.prompts  # the check ended, and asked
        said = editor.prompts[0].message  # why: the glob, or no sandbox here to run in at all
        assert "too many paths" in said or NO_SANDBOX in said, said
        (result,) = tool_results(model)
        assert "not run: dismissed" in result, result
    finally:
        await editor.stop()
