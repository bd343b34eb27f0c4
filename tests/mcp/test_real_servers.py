"""MCP servers nobody here wrote, through `talos run` (and server-everything through
`talos-ls`): the npm reference servers (server-everything over stdio and over Streamable HTTP,
server-filesystem) installed in a cache under the home directory, which the sandbox must show
read-only, and mcp-server-time from PyPI in a virtualenv of its own."""

from __future__ import annotations

import json
import socket
import subprocess
import time

import pytest

from talos_ls.demo.scripted_model import reply

from ..lsp.conftest import start_editor
from ..pseudo_terminal import Terminal, plain
from .conftest import offered, tool_results
from .test_lsp import _config

# Reference servers from npm and PyPI, each started in the sandbox: the full tier (CI,
# `--full`); our own servers (tests/mcp/test_run.py, test_lsp.py) run in the default one.
pytestmark = pytest.mark.full


def call(name: str, args: dict, n: int = 1):
    return reply(None, [(f"c{n}", name, json.dumps(args))])


def everything(npm_servers) -> dict:
    program = npm_servers / "node_modules" / ".bin" / "mcp-server-everything"
    return {"command": str(program), "args": ["stdio"]}


def test_server_everything_over_stdio_in_the_sandbox(sandbox, server, person, npm_servers):
    person.servers({"every": everything(npm_servers)})
    person.allow("mcp__every__*")
    server.script += [
        call("mcp__every__echo", {"message": "hello"}),
        call("mcp__every__get-sum", {"a": 2, "b": 3}, n=2),
        call("mcp__every__get-env", {}, n=3),
        call("mcp__every__get-resource-links", {"count": 2}, n=4),
        call("mcp__every__get-tiny-image", {}, n=5),
        reply("done."),
    ]
    r = person.run(server, SECRET_TOKEN="do-not-pass-me-1234567890")
    assert r.returncode == 0, r.stderr
    tools = offered(server)
    assert "mcp__every__echo" in tools and "mcp__every__get-sum" in tools
    echo, total, env, links, image = tool_results(server)
    assert echo == "Echo: hello"
    assert "5" in total
    # its environment: the sandbox's allow-list; nothing of Talos's own
    assert "do-not-pass-me" not in env and "OPENAI" not in env and "/tmp/home" in env
    assert "[resource link: " in links
    assert "[image: image/png, about" in image and "not shown]" in image


def test_server_everything_env_from_a_variable_reaches_it_and_is_never_shown(
    sandbox, server, person, npm_servers
):
    entry = {**everything(npm_servers), "env": {"MY_SETTING": "${THE_VALUE}"}}
    person.servers({"every": entry})
    person.allow("mcp__every__*")
    server.script += [call("mcp__every__get-env", {}), reply("done.")]
    r = person.run(server, THE_VALUE="plainvalue42")
    assert r.returncode == 0, r.stderr
    (env,) = tool_results(server)
    # it reached the server; a value from a variable is redacted like a key wherever it shows
    assert '"MY_SETTING": "[redacted secret]"' in env and "plainvalue42" not in env
    listed = person.talos("mcp", "list", THE_VALUE="plainvalue42")
    assert listed.returncode == 0, listed.stderr
    assert "[ready]" in listed.stdout and "sets MY_SETTING" in listed.stdout
    assert "plainvalue42" not in listed.stdout + listed.stderr


def test_a_missing_variable_is_named_and_nothing_starts(sandbox, server, person, npm_servers):
    person.servers({"every": {**everything(npm_servers), "env": {"K": "${NOT_SET_ANYWHERE}"}}})
    server.script += [reply("done.")]
    r = person.run(server)
    assert r.returncode == 0, r.stderr
    assert "names ${NOT_SET_ANYWHERE}, which is not set" in " ".join(r.stdout.split())
    assert not [n for n in offered(server) if n.startswith("mcp__")]


def test_server_filesystem_reads_the_workspace_but_not_the_home(
    sandbox, server, person, npm_servers, tmp_path
):
    program = npm_servers / "node_modules" / ".bin" / "mcp-server-filesystem"
    (person.ws / "notes.txt").write_text("the workspace's notes\n")
    (person.ws / ".env").write_text("API_KEY=hidden-from-servers\n")
    person.servers({"fs": {"command": str(program), "args": [str(person.ws)]}})
    person.allow("mcp__fs__*")
    notes, dotenv = str(person.ws / "notes.txt"), str(person.ws / ".env")
    server.script += [
        call("mcp__fs__read_text_file", {"path": notes}),
        call("mcp__fs__read_text_file", {"path": dotenv}, n=2),
        call("mcp__fs__write_file", {"path": notes, "content": "overwritten"}, n=3),
        reply("done."),
    ]
    r = person.run(server)
    assert r.returncode == 0, r.stderr
    read, env, write = tool_results(server)
    assert read == "the workspace's notes\n"
    assert env == "(no content)"  # `.env*` files are empty to servers, as to commands
    assert write.startswith("error: EROFS: read-only file system")  # a tool error: a result
    assert (person.ws / "notes.txt").read_text() == "the workspace's notes\n"


def test_mcp_server_time_from_pypi_in_its_own_virtualenv(sandbox, server, person, time_server):
    person.servers({"time": {"command": str(time_server), "args": ["--local-timezone", "UTC"]}})
    person.allow("mcp__time__*")
    server.script += [
        call(
            "mcp__time__convert_time",
            {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"},
        ),
        reply("done."),
    ]
    r = person.run(server)
    assert r.returncode == 0, r.stderr
    (converted,) = tool_results(server)
    assert "21:00" in converted and "Asia/Tokyo" in converted


@pytest.fixture
def http_everything(npm_servers, tmp_path):
    """server-everything serving Streamable HTTP on a free port (outside any sandbox: an
    HTTP server is reached as configured)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    program = npm_servers / "node_modules" / ".bin" / "mcp-server-everything"
    log = open(tmp_path / "http-server.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [str(program), "streamableHttp"],
        env={"PATH": "/usr/bin:/bin", "PORT": str(port)},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    pytest.fail((tmp_path / "http-server.log").read_text()[-2000:])
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait(10)
        log.close()


def test_server_everything_over_streamable_http(server, person, http_everything):
    person.servers({"web": {"url": http_everything, "headers": {"X-Token": "${WEB_TOKEN}"}}})
    person.allow("mcp__web__*")
    server.script += [call("mcp__web__echo", {"message": "over http"}), reply("done.")]
    r = person.run(server, WEB_TOKEN="tok-123")
    assert r.returncode == 0, r.stderr
    assert tool_results(server) == ["Echo: over http"]


def test_an_elicitation_is_answered_at_the_terminal_and_declined_by_a_dismissal(
    sandbox, server, person, npm_servers
):
    person.servers({"every": everything(npm_servers)})
    person.allow("mcp__every__*")
    server.script += [
        call("mcp__every__trigger-elicitation-request", {}),
        call("mcp__every__trigger-elicitation-request", {}, n=2),
        reply("done."),
    ]
    term = Terminal(person.run_argv(server), person.env())
    try:
        term.until("The MCP server every asks")
        term.until("Decline")
        assert "Answer the required fields" in plain(term.raw)
        term.send("1\n")  # the required fields only: its name
        term.until("The MCP server every asks for String")
        term.send("Ada Lovelace\n")
        start = len(term.raw)
        term.until("The MCP server every asks", start)
        term.until("Decline", start)
        term.send("\n")  # dismissed: a decline, never an answer
        term.until("done.")
        assert term.finish() == 0
    finally:
        term.proc.kill()
    answered, dismissed = tool_results(server)
    assert "accept" in answered and "Ada Lovelace" in answered
    assert "decline" in dismissed and "Ada" not in dismissed


async def test_server_everything_through_talos_ls_asked_allowed_and_denied(
    sandbox, server, person, tmp_path, npm_servers
):
    _config(tmp_path, {"every": everything(npm_servers)})
    options = {
        "model": "fake-model",
        "baseUrl": server.url,
        "storeUrl": "sqlite:///" + str(tmp_path / "talos.db"),
    }
    server.script += [
        call("mcp__every__echo", {"message": "from the editor"}),
        call("mcp__every__echo", {"message": "not this"}, n=2),
        reply("finished"),
    ]
    editor = await start_editor(tmp_path / "home", [person.ws], options)
    try:
        editor.replies += ["Allow once", "Deny"]
        task_id = (await editor.command("talos.task.start", {"prompt": "echo"}))["task_id"]
        await editor.finished(task_id)
        asked, denied = editor.prompts
        assert asked.message.startswith("Use this MCP tool? `mcp__every__echo`")
        assert "Server: every, runs `" in asked.message
        assert '"message": "from the editor"' in asked.message
        assert '"message": "not this"' in denied.message
        assert tool_results(server) == ["Echo: from the editor", "error: not run: denied by you"]
    finally:
        await editor.stop()
