"""An MCP tool through `talos-ls` (the real server, a real LSP client): the call is asked
with `window/showMessageRequest`, allowed, and its result reaches the model; a server that
cannot start is in `talos/status`; a server's elicitation is asked with buttons (free text
cannot be typed there: declined, never answered)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from talos_ls.demo.scripted_model import reply

from ..lsp.conftest import start_editor
from .conftest import hostile


@pytest.fixture
def ws(person):
    return person.ws


@pytest.fixture
def model(server):
    return server


@pytest.fixture
def options(tmp_path, model):
    return {
        "model": "fake-model",
        "baseUrl": model.url,
        "storeUrl": "sqlite:///" + str(tmp_path / "talos.db"),
    }


def _running(mark: str) -> list[str]:
    """The processes whose command line holds `mark`."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if mark.encode() in (proc / "cmdline").read_bytes():
                found.append(proc.name)
        except OSError:
            continue
    return found


def _tool_results(model, index):
    return [m["content"] for m in model.requests[index]["body"]["messages"] if m["role"] == "tool"]


def _config(tmp_path, servers: dict) -> None:
    where = tmp_path / "home" / "config" / "talos"
    where.mkdir(parents=True, exist_ok=True)
    (where / "mcp.json").write_text(json.dumps({"mcpServers": servers}))


async def test_an_mcp_tool_is_asked_allowed_and_its_result_reaches_the_model(
    sandbox, tmp_path, ws, options, model
):
    mark = f"talos-test-{uuid.uuid4().hex}"  # on the server's command line: found after stop
    plain = {**hostile("plain"), "args": [*hostile("plain")["args"], "", mark]}
    _config(tmp_path, {"h": plain, "gone": {"command": "/nonexistent/srv"}})
    model.script += [
        reply("", [("c1", "mcp__h__echo", json.dumps({"text": "from the editor"}))]),
        reply("finished"),
    ]
    editor = await start_editor(tmp_path / "home", [ws], options)
    try:
        listed = await editor.until(
            lambda: [f.mcp for s in editor.statuses for f in s.folders if getattr(f, "mcp", None)],
            "the servers in talos/status",
        )
        # lazily: configured, not started until a task needs the tools
        assert {(m.name, m.state) for m in listed[0]} == {("h", "stopped"), ("gone", "stopped")}
        assert _running(mark) == []
        editor.replies.append("Allow once")
        task_id = (await editor.command("talos.task.start", {"prompt": "use it"}))["task_id"]
        await editor.finished(task_id)
        (prompt,) = editor.prompts
        assert prompt.message.startswith("Use this MCP tool? `mcp__h__echo`")
        assert '"text": "from the editor"' in prompt.message
        assert [a.title for a in prompt.actions] == [
            "Allow once",
            "Always allow `mcp__h__echo`",
            "Deny",
        ]
        assert _tool_results(model, 1) == ["echo: from the editor"]

        def failed():
            for status in editor.statuses:
                for folder in status.folders:
                    for server in getattr(folder, "mcp", None) or []:
                        if server.name == "gone" and server.state in ("failed", "restarting"):
                            return server
            return None

        gone = await editor.until(failed, "the failed server in talos/status")
        assert gone.error == (
            "its program '/nonexistent/srv' is not found (not on the PATH Talos was started "
            "with, and no such file)"
        )
        assert any("MCP server gone" in m for m in editor.messages())
        assert _running(mark)  # the server runs while the daemon does
    finally:
        await editor.stop()
    assert _running(mark) == []  # shutdown stopped it


async def test_a_server_that_dies_mid_call_leaves_the_daemon_up(
    sandbox, tmp_path, ws, options, model
):
    _config(tmp_path, {"h": hostile("exit")})
    model.script += [
        reply("", [("c1", "mcp__h__echo", json.dumps({"text": "x"}))]),
        reply("finished"),
        reply("still here"),
    ]
    editor = await start_editor(tmp_path / "home", [ws], options)
    try:
        editor.replies.append("Allow once")
        task_id = (await editor.command("talos.task.start", {"prompt": "use it"}))["task_id"]
        await editor.finished(task_id)
        assert _tool_results(model, 1) == ["error: the MCP server h stopped: it exited (code 3)"]
        again = (await editor.command("talos.task.start", {"prompt": "more"}))["task_id"]
        await editor.finished(again)
        assert (await editor.task(again))["state"] == "done"
    finally:
        await editor.stop()


async def test_a_denied_call_never_reaches_the_server(sandbox, tmp_path, ws, options, model):
    _config(tmp_path, {"h": hostile("plain")})
    model.script += [
        reply("", [("c1", "mcp__h__echo", json.dumps({"text": "x"}))]),
        reply("", [("c2", "mcp__h__calls", "{}")]),
        reply("finished"),
    ]
    editor = await start_editor(tmp_path / "home", [ws], options)
    try:
        editor.replies += ["Deny", "Allow once"]
        task_id = (await editor.command("talos.task.start", {"prompt": "use it"}))["task_id"]
        await editor.finished(task_id)
        assert _tool_results(model, 2) == ["error: not run: denied by you", "calls so far: []"]
    finally:
        await editor.stop()


async def test_an_elicitation_is_asked_with_buttons_naming_the_server_and_a_dismissal_declines(
    sandbox, tmp_path, ws, options, model
):
    _config(tmp_path, {"h": hostile("elicit")})
    model.script += [
        reply("", [("c1", "mcp__h__pick", "{}")]),
        reply("", [("c2", "mcp__h__pick", "{}")]),
        reply("finished"),
    ]
    editor = await start_editor(tmp_path / "home", [ws], options)
    try:
        # allow the tool; answer the form, pick blue; allow again; dismiss the form
        editor.replies += [
            editor.button("Always allow"),
            "Answer every field",
            "blue",
            None,
        ]
        task_id = (await editor.command("talos.task.start", {"prompt": "pick"}))["task_id"]
        await editor.finished(task_id)
        asks = [p.message for p in editor.prompts[1:]]
        assert asks[0].startswith("The MCP server h asks (during a tool call):")
        assert "\\x1b[2J" in asks[0] and "\x1b" not in asks[0]
        assert [a.title for a in editor.prompts[2].actions] == ["red", "blue", "Decline"]
        assert _tool_results(model, 2) == ["accept {'colour': 'blue'}", "decline None"]
    finally:
        await editor.stop()
