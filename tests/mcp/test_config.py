"""The MCP configuration, its trust, tool naming and bounds, results, elicitation prompts and
the permission rules for tools: the parts, without a server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from mcp import types

from talos_ls.gates.permissions import Policy
from talos_ls.mcp import config as mcp_config
from talos_ls.mcp.adapt import MAX_DESCRIPTION, MAX_SCHEMA, render, spec_of
from talos_ls.mcp.config import McpConfigError, parse_file, parse_server, session_servers
from talos_ls.mcp.elicit import ask_person
from talos_ls.mcp.launch import install_tree


# --------------------------------------------------------------------------- parsing
def test_the_shapes_people_already_have():
    servers = parse_file(
        {
            "mcpServers": {
                "git": {"command": "uvx", "args": ["mcp-server-git"], "env": {"A": "b"}},
                "docs": {"url": "https://example.com/mcp", "headers": {"Authorization": "x"}},
                "off": {"command": "x", "disabled": True},
            }
        },
        "your settings",
        {},
    )
    git, docs = servers
    assert (git.transport, git.command, git.args, git.env) == (
        "stdio",
        "uvx",
        ("mcp-server-git",),
        (("A", "b"),),
    )
    assert (docs.transport, docs.url, docs.headers) == (
        "http",
        "https://example.com/mcp",
        (("Authorization", "x"),),
    )


def test_variables_are_expanded_and_never_shown():
    (server,) = parse_file(
        {"mcpServers": {"s": {"command": "srv", "env": {"TOKEN": "Bearer ${MY_TOKEN}"}}}},
        "your settings",
        {"MY_TOKEN": "s3cret-value"},
    )
    assert server.env == (("TOKEN", "Bearer s3cret-value"),)
    assert "s3cret" not in server.describe() and "s3cret" not in repr(server)
    assert "sets TOKEN" in server.describe()
    with pytest.raises(McpConfigError) as missing:
        parse_server("s", {"command": "srv", "env": {"T": "${NOPE}"}}, "x", {"OTHER": "v"})
    assert str(missing.value) == "x: server s: env T names ${NOPE}, which is not set"


@pytest.mark.parametrize(
    ("name", "entry", "said"),
    [
        ("a__b", {"command": "x"}, "the server name 'a__b' must be"),
        ("x\x1b[2J", {"command": "x"}, "the server name 'x\\\\x1b[2J' must be"),
        ("", {"command": "x"}, "the server name '' must be"),
        ("s", {"command": "x", "url": "http://h"}, "needs either command"),
        ("s", {}, "needs either command"),
        ("s", {"command": "x", "shell": True}, "unknown keys ['shell']"),
        ("s", {"url": "file:///etc/passwd"}, "url must be an http"),
        ("s", {"command": "x", "args": "a b"}, "args must be a list of strings"),
        ("s", {"command": "x", "timeout": 0}, "timeout must be seconds"),
        ("s", {"command": "x", "network": "yes"}, "network must be true or false"),
        ("s", {"command": "x", "env": {"A B": "v"}}, "is not a name"),
    ],
)
def test_a_bad_entry_is_named(name, entry, said):
    with pytest.raises(McpConfigError) as err:
        parse_server(name, entry, "your settings", {})
    assert said in str(err.value)
    assert "\x1b" not in str(err.value)


def test_an_acp_sessions_servers():
    stdio, http = session_servers(
        [
            {"name": "a", "command": "/bin/srv", "args": [], "env": [{"name": "K", "value": "v"}]},
            {"type": "http", "name": "b", "url": "http://127.0.0.1:1/mcp", "headers": []},
        ],
        {},
    )
    assert stdio.source == "the session" and stdio.env == (("K", "v"),)
    assert http.transport == "http"
    with pytest.raises(McpConfigError):
        session_servers([{"name": "a", "command": "x", "env": [{"name": "K"}]}], {})


# ----------------------------------------------------------------------------- trust
def write(path: Path, servers: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"mcpServers": servers}))


def test_the_workspaces_file_is_used_only_once_trusted_and_an_edit_untrusts_it(tmp_path):
    config, ws = tmp_path / "config", tmp_path / "ws"
    write(config / "mcp.json", {"mine": {"command": "a"}, "both": {"command": "mine"}})
    write(ws / ".talos" / "mcp.json", {"theirs": {"command": "b"}, "both": {"command": "theirs"}})
    loaded = mcp_config.load(ws, config)
    assert [s.name for s in loaded.servers] == ["mine", "both"]
    assert [s.name for s in loaded.untrusted] == ["theirs", "both"]
    assert loaded.workspace_sha256 is not None
    mcp_config.trust(ws, loaded.workspace_sha256, config)
    loaded = mcp_config.load(ws, config)
    assert [(s.name, s.command) for s in loaded.servers] == [
        ("mine", "a"),
        ("both", "mine"),  # the person's own wins a clash
        ("theirs", "b"),
    ]
    assert loaded.untrusted == []
    write(ws / ".talos" / "mcp.json", {"theirs": {"command": "c"}})
    loaded = mcp_config.load(ws, config)
    assert [s.name for s in loaded.servers] == ["mine", "both"] and loaded.untrusted
    # nothing of the trust is in the repository
    assert list((ws / ".talos").iterdir()) == [ws / ".talos" / "mcp.json"]


def test_a_broken_file_is_a_problem_said_and_the_others_still_load(tmp_path):
    config, ws = tmp_path / "config", tmp_path / "ws"
    write(config / "mcp.json", {"mine": {"command": "a"}})
    (ws / ".talos").mkdir(parents=True)
    (ws / ".talos" / "mcp.json").write_text("{not json")
    loaded = mcp_config.load(ws, config)
    assert [s.name for s in loaded.servers] == ["mine"]
    (problem,) = loaded.problems
    assert "mcp.json: not valid JSON" in problem


def test_a_session_names_servers_for_itself(tmp_path):
    config = tmp_path / "config"
    write(config / "mcp.json", {"a": {"command": "mine"}})
    session = session_servers([{"name": "a", "command": "acp"}], {})
    loaded = mcp_config.load(tmp_path, config, session)
    assert [(s.name, s.command, s.source) for s in loaded.servers] == [("a", "acp", "the session")]


# ----------------------------------------------------------------------------- rules
def test_tool_rules_match_names_and_globs_and_deny_wins(tmp_path):
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "permissions.json").write_text(
        json.dumps({"tools": {"allow": ["mcp__git__*"], "deny": ["mcp__git__push"]}})
    )
    policy = Policy.load(tmp_path, "ask", config=tmp_path / "c")
    assert policy.check_tool("mcp__git__log").verdict == "allow"
    assert policy.check_tool("mcp__git__push").verdict == "deny"
    assert policy.check_tool("mcp__other__x").verdict == "ask"
    assert policy.for_task("full-auto").check_tool("mcp__other__x").verdict == "allow"
    assert policy.for_task("full-auto").check_tool("mcp__git__push").verdict == "deny"
    assert policy.for_task("read-only").check_tool("mcp__other__x").verdict == "deny"


def test_an_untrusted_permissions_file_cannot_allow_a_tool_but_can_deny_one(tmp_path):
    ws = tmp_path / "ws"
    (ws / ".talos").mkdir(parents=True)
    (ws / ".talos" / "permissions.json").write_text(
        json.dumps({"tools": {"allow": ["mcp__*"], "deny": ["mcp__s__rm"]}})
    )
    policy = Policy.load(ws, "ask", config=tmp_path / "c")
    assert policy.check_tool("mcp__s__ls").verdict == "ask"
    assert policy.check_tool("mcp__s__rm").verdict == "deny"
    assert "the MCP tool mcp__*" in policy.untrusted_grants
    policy.trust_workspace_file()
    assert policy.check_tool("mcp__s__ls").verdict == "allow"


def test_always_allow_saves_the_tool_in_the_persons_settings(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    policy = Policy.load(ws, "ask", config=tmp_path / "c")
    asked: list[str] = []

    async def prompter(message, options):
        asked.append(message)
        return options[1]

    decision = asyncio.run(policy.authorize_tool("mcp__s__t", "s, somewhere", "{}", prompter))
    assert decision.verdict == "allow"
    assert "Use this MCP tool? `mcp__s__t`" in asked[0] and "Server: s, somewhere" in asked[0]
    again = Policy.load(ws, "ask", config=tmp_path / "c")
    assert again.check_tool("mcp__s__t").verdict == "allow"
    assert not (ws / ".talos").exists()


def test_headless_or_dismissed_is_denied(tmp_path):
    policy = Policy.load(tmp_path, "ask", config=tmp_path / "c")

    async def dismiss(message, options):
        return None

    assert asyncio.run(policy.authorize_tool("mcp__s__t", "s", "{}", None)).verdict == "deny"
    said = asyncio.run(policy.authorize_tool("mcp__s__t", "s", "{}", dismiss))
    assert (said.verdict, said.reason) == ("deny", "dismissed: denied")


# ----------------------------------------------------------------- tools and results
def tool(name="t", description="d", schema=None):
    return SimpleNamespace(
        name=name, description=description, inputSchema=schema or {"type": "object"}
    )


def test_tool_names_the_model_cannot_carry_are_left_out():
    assert spec_of("s", tool("ok-name_1")).full == "mcp__s__ok-name_1"
    assert "cannot be offered" in spec_of("s", tool("a.b/c"))
    assert "cannot be offered" in spec_of("s", tool("x" * 60))
    assert "cannot be offered" in spec_of("s", tool("ev\x1bil"))


def test_schemas_and_descriptions_are_bounded():
    big = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(2000)}}
    assert f"{MAX_SCHEMA // 1024} KB" in spec_of("s", tool(schema=big))
    assert "not an object" in spec_of("s", tool(schema={"type": "string"}))
    long = spec_of("s", tool(description="x" * 10_000 + "\x1b[2J"))
    assert len(long.description) < MAX_DESCRIPTION + 40 and long.description.endswith("[...]")
    escaped = spec_of("s", tool(description="a\x1b[31mb\nc"))
    assert escaped.description == "[MCP server s] a\\x1b[31mb\\nc"


def test_results_as_the_model_reads_them():
    result = types.CallToolResult(
        content=[
            types.TextContent(type="text", text="hello"),
            types.ImageContent(type="image", data="QUJD" * 100, mimeType="image/png"),
            types.ResourceLink(type="resource_link", name="readme", uri="file:///r.md"),
        ],
        structuredContent={"n": 1},
        isError=True,
    )
    text, failed = render(result)
    assert failed
    assert text.splitlines() == [
        "hello",
        "[image: image/png, about 300 bytes, not shown]",
        "[resource link: readme file:///r.md]",
        'structured content: {"n": 1}',
    ]
    same = types.CallToolResult(
        content=[types.TextContent(type="text", text='{"n": 1}')], structuredContent={"n": 1}
    )
    assert render(same) == ('{"n": 1}', False)


# ------------------------------------------------------------------------ elicitation
def form(schema, message="Tell me"):
    return types.ElicitRequestFormParams(message=message, requestedSchema=schema)


SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Name"},
        "color": {"type": "string", "enum": ["red", "blue"]},
        "ok": {"type": "boolean"},
    },
    "required": ["name", "color"],
}


def replies(*answers):
    asked: list[tuple[str, list[str]]] = []
    queue = list(answers)

    async def prompt(message, options):
        asked.append((message, list(options)))
        return queue.pop(0)

    return prompt, asked


def test_an_elicitation_names_its_server_and_takes_the_persons_answers():
    confirm, asked = replies("Answer the required fields", "blue")
    text, typed = replies("Ada")
    result = asyncio.run(ask_person("srv", form(SCHEMA), confirm, text))
    assert result.action == "accept" and result.content == {"name": "Ada", "color": "blue"}
    assert all("The MCP server srv asks" in m for m, _ in asked + typed)
    assert asked[1][1] == ["red", "blue", "Decline"]


@pytest.mark.parametrize("where", [0, 1])
def test_a_dismissal_anywhere_is_a_decline(where):
    answers = ["Answer every field", "red"]
    answers[where] = None
    confirm, _ = replies(*answers)
    text, _ = replies("Ada")
    result = asyncio.run(ask_person("srv", form(SCHEMA), confirm, text))
    assert (result.action, result.content) == ("decline", None)


def test_free_text_where_the_surface_has_only_buttons_declines():
    confirm, _ = replies("Answer the required fields")
    result = asyncio.run(ask_person("srv", form(SCHEMA), confirm, None))
    assert result.action == "decline"
    assert asyncio.run(ask_person("srv", form(SCHEMA), None, None)).action == "decline"


def test_the_servers_message_is_shown_as_plain_text():
    confirm, asked = replies(None)
    asyncio.run(ask_person("srv", form(SCHEMA, "hi\x1b[2J\x1b]0;t\x07"), confirm, None))
    assert "\x1b" not in asked[0][0] and "\\x1b[2J" in asked[0][0]


# ---------------------------------------------------------------------- install trees
def test_install_trees(tmp_path):
    pkg = tmp_path / "cache" / "node_modules" / "@x" / "srv" / "dist"
    pkg.mkdir(parents=True)
    (pkg / "index.js").write_text("")
    assert install_tree(pkg / "index.js") == tmp_path / "cache"
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (venv / "bin" / "srv").write_text("")
    assert install_tree(venv / "bin" / "srv") == venv
    (tmp_path / "s.py").write_text("")
    assert install_tree(tmp_path / "s.py") == tmp_path


def test_a_server_paginating_for_ever_is_read_a_bounded_number_of_pages():
    from talos_ls.mcp.adapt import adapt_tools

    pages: list[object] = []

    class Endless:
        async def list_tools(self, params=None):
            pages.append(params)
            return SimpleNamespace(
                tools=[tool(f"t{len(pages)}_{i}") for i in range(60)], nextCursor="more"
            )

    specs, said = asyncio.run(adapt_tools("s", Endless()))
    assert len(specs) == 100 and len(pages) == 2
    assert said == "it offered 120+ tools: only 100 are used"


def test_one_servers_tools_take_a_bounded_share_of_the_context():
    from talos_ls.mcp.adapt import MAX_SERVER_SCHEMAS, adapt_tools

    wide = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(400)}}

    class Wide:
        async def list_tools(self, params=None):
            return SimpleNamespace(
                tools=[tool(f"t{i}", schema=wide) for i in range(50)], nextCursor=None
            )

    specs, said = asyncio.run(adapt_tools("s", Wide()))
    total = sum(len(json.dumps(s.schema())) for s in specs)
    assert 0 < len(specs) < 50 and total <= MAX_SERVER_SCHEMAS
    assert said == f"{50 - len(specs)} left out: its tools' schemas passed 64 KB"


def test_every_servers_tools_together_take_a_bounded_share_of_the_context(caplog):
    from talos_ls.mcp.client import MAX_ALL_SCHEMAS, Connection, McpManager

    wide = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(300)}}
    manager = McpManager(None)
    for name in ("a", "b", "c", "d", "e"):
        conn = Connection(parse_server(name, {"command": "x"}, "x", {}), state="ready")
        conn.tools = [spec_of(name, tool(f"t{i}", schema=wide)) for i in range(10)]
        manager.connections[name] = conn

    async def listed():
        tools = await manager._all_tools()
        await asyncio.sleep(0)  # the notice is said on this loop
        return tools

    manager._host_loop = None
    tools = asyncio.run(listed())
    total = sum(len(json.dumps(t.schema())) for t in tools)
    assert total <= MAX_ALL_SCHEMAS and tools[0].full == "mcp__a__t0"
    assert {t.server for t in tools} >= {"a", "b"} and len(tools) < 50
    (said,) = [r.getMessage() for r in caplog.records if "passed 128 KB" in r.getMessage()]
    assert said.startswith("MCP: the servers' tools passed 128 KB of the model's context: ")


def test_a_url_elicitation_shows_the_address_as_text_and_opens_nothing():
    confirm, asked = replies("Accept")
    params = types.ElicitRequestURLParams(
        message="Sign in", url="https://evil.example/\x1b[2J", elicitationId="e1"
    )
    result = asyncio.run(ask_person("srv", params, confirm, None))
    assert result.action == "accept" and result.content is None
    ((message, options),) = asked
    assert "It asks you to open: https://evil.example/\\x1b[2J" in message
    assert options == ["Accept", "Decline"]


def test_permissions_lists_tool_rules(person):
    (person.config / "talos" / "permissions.json").write_text(
        json.dumps({"tools": {"allow": ["mcp__a__*"], "deny": ["mcp__a__rm"]}})
    )
    r = person.talos("permissions")
    assert "allows: " in r.stdout and "the MCP tool mcp__a__*" in r.stdout
    assert "denies: the MCP tool mcp__a__rm" in r.stdout


def test_a_virtualenvs_python_is_shown_with_it(tmp_path):
    from talos_ls.mcp.launch import trees

    python = tmp_path / "pythons" / "3.99"
    (python / "bin").mkdir(parents=True)
    venv = tmp_path / "venvs" / "srv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text(f"home = {python / 'bin'}\n")
    program = venv / "bin" / "srv"
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    server = parse_server("s", {"command": str(program)}, "x", {})
    shown, refused = trees(server, tmp_path / "ws")
    assert shown == [venv, python] and refused == []
