"""A client that changes, mid-session, what the agent may do (`permissionMode`,
`readablePaths`, `limits`), against the real `talos-ls` (pytest-lsp's client, the scripted
model, the real sandbox):
- a running task keeps what its commands may read and use, as it keeps its mode: a change
  reaches the tasks started after it, never the next command of one already running;
- a change that widens what the agent may do waits for the person (a prompt, or a restart);
  what narrows applies at once, unasked; a value the person declined is not asked again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types

from talos_ls.demo.scripted_model import reply

from ..lsp import conftest as lsp
from ..lsp.conftest import Editor, start_editor
from ..system import require_sandbox
from .test_lsp import calls, run_task, tool_results
from .test_lsp_session import change, started

model, ws = lsp.model, lsp.ws
APPLY, KEEP = "Apply the new settings", "Keep the current ones"
BIG = "head -c 2097152 /dev/zero > /tmp/big && wc -c < /tmp/big"  # a 2 MiB file


@pytest.fixture
def elsewhere(tmp_path) -> tuple[Path, str]:
    """A directory outside the workspace holding a file, and the file's text."""
    where = tmp_path / "elsewhere"
    where.mkdir()
    text = "TalosElsewhereMarker-7c1e"
    (where / "data.txt").write_text(text + "\n")
    return where, text


def settings_options(tmp_path: Path, model: Any, **more: Any) -> dict[str, Any]:
    return {
        "model": "fake-model",
        "baseUrl": model.url,
        "storeUrl": "sqlite:///" + str(tmp_path / "talos.db"),
        "prices": {"fake-model": {"input": 1, "cached_input": 0.5, "output": 2}},
        **more,
    }


def commands(editor: Editor) -> list[types.ShowMessageRequestParams]:
    return [p for p in editor.prompts if "Run this command" in p.message]


def widenings(editor: Editor) -> list[types.ShowMessageRequestParams]:
    return [p for p in editor.prompts if "settings were changed" in p.message]


async def test_a_running_task_keeps_what_its_commands_may_read_and_use(
    tmp_path, ws, model, elsewhere
):
    """Narrowed mid-task (no readable path, 1 MiB files: applied at once, unasked), the running
    task's next commands still read the path and write 2 MiB; the next task's do not."""
    require_sandbox()
    where, text = elsewhere
    options = settings_options(tmp_path, model, readablePaths=[str(where)])
    editor = await started(await start_editor(tmp_path / "home", [ws], options))
    try:

        def narrow_then_allow(params: types.ShowMessageRequestParams) -> str:
            if not editor.prompts[:-1]:  # at the first command: sent before this reply
                change(editor, readablePaths=[], limits={"file_mb": 1})
            return "Allow once"

        editor.replies += [narrow_then_allow] * 2
        read = f"cat {where}/data.txt 2>&1"
        script = [
            reply("", calls("run_command", {"command": read})),
            reply("", calls("run_command", {"command": BIG})),
            reply("done"),
        ]
        model.script += script
        await run_task(editor, "read it, write it")
        got_read, got_big = tool_results(model)
        assert text in got_read, got_read  # the task's own readable path
        assert "2097152" in got_big and "killed" not in got_big, got_big  # its own limits
        settings = (await editor.command("talos.status", {}))["settings"]
        assert settings["readablePaths"] == [] and settings["limits"]["file_mb"] == 1
        assert widenings(editor) == []  # narrowing asks nobody
        # A task started now has the narrowed settings.
        editor.replies += ["Allow once"] * 2
        model.script += script
        await run_task(editor, "again")
        got_read, got_big = tool_results(model)
        assert text not in got_read and "No such file" in got_read, got_read
        assert "a file reached the size limit of 1 MiB" in got_big, got_big
        assert len(commands(editor)) == 4
    finally:
        await editor.stop()


async def test_a_client_cannot_widen_what_the_agent_may_do_without_the_person(
    tmp_path, ws, model, elsewhere
):
    require_sandbox()
    where, text = elsewhere
    other = tmp_path / "other"
    other.mkdir()
    options = settings_options(tmp_path, model, limits={"file_mb": 1})
    editor = await started(await start_editor(tmp_path / "home", [ws], options))
    read = f"cat {where}/data.txt 2>&1"
    try:
        # Raised mode, a new readable path, one limit raised and one lowered: asked.
        widen = {
            "permissionMode": "full-auto",
            "readablePaths": [str(where)],
            "limits": {"file_mb": 4096, "processes": 100},
        }
        editor.replies.append(None)  # dismissed
        change(editor, **widen)
        (prompt,) = await editor.until(lambda: widenings(editor), "the prompt")
        assert [a.title for a in prompt.actions] == [APPLY, KEEP]
        for said in (
            "the permission mode from ask to full-auto",
            f"commands may read {where}",
            "higher limits on each command (file_mb 1 to 4096)",
            "keeps the mode ask",
            "no readable paths",
        ):
            assert said in prompt.message, prompt.message
        assert "processes" not in prompt.message.split("Until")[0]  # lowered: not asked
        await editor.until(
            lambda: [m for m in editor.messages() if "Talos keeps" in m and "restart" in m],
            "the notice",
        )
        settings = (await editor.command("talos.status", {}))["settings"]
        assert settings["permissionMode"] == "ask" and settings["readablePaths"] == []
        assert (settings["limits"]["file_mb"], settings["limits"]["processes"]) == (1, 100)
        # A task runs as before: the command is asked (ask mode), and the path is not there.
        editor.replies.append("Allow once")
        model.script += [reply("", calls("run_command", {"command": read})), reply("done")]
        await run_task(editor, "read it")
        (got,) = tool_results(model)
        assert text not in got and "No such file" in got, got
        # The same values again: declined this session, not asked again; other values are.
        change(editor, **widen)
        editor.replies.append(APPLY)
        change(
            editor,
            permissionMode="auto-edit",
            readablePaths=[str(where), str(other)],
            limits={"file_mb": 2048, "processes": 100},
        )
        await editor.until(lambda: len(widenings(editor)) == 2, "the second prompt")
        second = widenings(editor)[1].message
        assert "from ask to auto-edit" in second and f"{where}, {other}" in second, second
        await editor.until(
            lambda: (s := editor.last_status()) and s.settings.permissionMode == "auto-edit",
            "the new mode",
        )
        settings = (await editor.command("talos.status", {}))["settings"]
        assert settings["readablePaths"] == [str(where), str(other)]
        assert settings["limits"]["file_mb"] == 2048
        editor.replies.append("Allow once")
        model.script += [reply("", calls("run_command", {"command": read})), reply("done")]
        await run_task(editor, "read it now")
        (got,) = tool_results(model)
        assert text in got, got
        # Narrowing applies at once, unasked.
        change(editor, permissionMode="read-only", readablePaths=[str(other)])
        await editor.until(
            lambda: (s := editor.last_status()) and s.settings.permissionMode == "read-only",
            "read-only",
        )
        assert (await editor.command("talos.status", {}))["settings"]["readablePaths"] == [
            str(other)
        ]
        assert len(widenings(editor)) == 2
    finally:
        await editor.stop()
