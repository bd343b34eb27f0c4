"""MCP servers an ACP client names in `session/new` (`mcpServers`, issue 33): used for the
session's tasks under the same gate and sandbox, the call asked with
`session/request_permission`, its result reaching the model; a server's elicitation asked the
same way, naming the server, a dismissal declining it; a server list Talos cannot use is a
JSON-RPC error naming what is wrong, and never a value of `env`."""

from __future__ import annotations

import json

import pytest
from acp.schema import McpServerStdio

from talos_ls.demo.scripted_model import reply
from tests.acp.conftest import call
from tests.acp.test_hostile import INIT, start_raw
from tests.mcp.conftest import hostile, offered, sandbox, tool_results  # noqa: F401  (`sandbox`: bwrap, or a skip)

pytestmark = pytest.mark.slow
SECRET = "sk-live-NEVER-SHOWN-0123456789"
ENV = {"name": "KEY", "value": SECRET}


@pytest.mark.usefixtures("sandbox")
async def test_a_sessions_mcp_server_is_asked_allowed_and_answers_the_model(agent, model, ws):
    entry = hostile("plain")
    server = McpServerStdio(name="h", command=entry["command"], args=entry["args"], env=[])
    model.script = [
        reply(tool_calls=[call("c1", "mcp__h__echo", text="from the session")]),
        reply("Echoed."),
    ]
    await agent.start()
    agent.person.permit = ["allow_once"]
    new = await agent.conn.new_session(cwd=str(ws), mcp_servers=[server])
    done = await agent.prompt(new.session_id, "echo something through the tool")
    assert done.stop_reason == "end_turn"
    assert "mcp__h__echo" in offered(model)
    ((tool_call, options),) = agent.person.permissions
    assert "mcp__h__echo" in json.dumps(tool_call.model_dump(mode="json"))
    assert {o.kind for o in options} >= {"allow_once", "reject_once"}
    assert len(model.requests) == 2 and tool_results(model) == ["echo: from the session"]


@pytest.mark.parametrize(
    ("servers", "said"),
    [
        ([{"name": "x", "command": "", "args": [], "env": []}], "command must be"),
        ([{"name": "x", "command": "srv", "args": [], "env": [{**ENV, "name": "A B"}]}], "'A B'"),
        ([{"type": "sse", "name": "y", "url": "http://127.0.0.1:9/", "headers": []}], "SSE"),
        (
            [{"name": "bad name!", "command": "srv", "args": [], "env": [ENV]}],
            "bad name!",
        ),
    ],
)
async def test_a_server_list_talos_cannot_use_is_an_error_naming_it(home, ws, servers, said):
    raw = await start_raw(home)
    try:
        await raw.request(1, "initialize", INIT)
        await raw.reply_to(1)
        await raw.request(2, "session/new", {"cwd": str(ws), "mcpServers": servers})
        error = (await raw.reply_to(2))["error"]
        assert error["code"] == -32602 and said in json.dumps(error), error
        assert SECRET not in json.dumps(raw.messages)  # a value of env is never shown
        await raw.request(3, "session/new", {"cwd": str(ws), "mcpServers": []})
        assert "sessionId" in (await raw.reply_to(3))["result"]  # still serving
    finally:
        raw.process.stdin.close()
        await raw.close()


@pytest.mark.usefixtures("sandbox")
async def test_a_servers_elicitation_is_asked_with_permission_options_and_a_dismissal_declines(
    agent, model, ws
):
    entry = hostile("elicit")
    server = McpServerStdio(name="h", command=entry["command"], args=entry["args"], env=[])
    model.script = [
        reply(tool_calls=[call("c1", "mcp__h__pick")]),
        reply(tool_calls=[call("c2", "mcp__h__pick")]),
        reply("Picked."),
    ]
    await agent.start()
    # allow the tool; answer the form, pick blue; allow again; dismiss the form
    agent.person.permit = ["allow_once", "Answer every field", "blue", "allow_once", "cancel"]
    new = await agent.conn.new_session(cwd=str(ws), mcp_servers=[server])
    done = await agent.prompt(new.session_id, "pick a colour")
    assert done.stop_reason == "end_turn"
    asks = agent.person.permissions[1:3] + agent.person.permissions[4:]
    for tool_call, options in asks:
        assert tool_call.title.startswith("The MCP server h asks"), tool_call.title
        # a decline is offered as a rejection, never as an allowing option
        assert [o.kind for o in options if o.name == "Decline"] == ["reject_once"]
    assert [o.name for o in agent.person.permissions[2][1]] == ["red", "blue", "Decline"]
    assert tool_results(model) == ["accept {'colour': 'blue'}", "decline None"]
