"""The connection manager with a real server in the real sandbox: a server that keeps dying
is started again after a back-off, said once, and given up after a few tries."""

from __future__ import annotations

import asyncio
import time

import pytest

from talos_ls.agent.sandbox import Sandbox
from talos_ls.mcp import client
from talos_ls.mcp.client import McpError, McpManager
from talos_ls.mcp.config import parse_server
from talos_ls.mcp.launch import plan

from .conftest import hostile


async def test_a_dying_server_is_restarted_after_a_back_off_then_given_up(
    sandbox, tmp_path, monkeypatch
):
    monkeypatch.setattr(client, "BACKOFF", (0.2, 0.2, 0.2, 0.2, 0.2))
    monkeypatch.setattr(client, "MAX_RESTARTS", 3)
    ws = tmp_path / "ws"
    ws.mkdir()
    box = Sandbox(ws)
    said: list[str] = []
    manager = McpManager(lambda s: plan(box, s), said.append)
    manager.configure([parse_server("h", hostile("exit"), "test", {})])
    outcomes = []
    try:
        assert [t.full for t in await manager.tools()] == ["mcp__h__echo"]
        conn = manager.connections["h"]
        for _ in range(6):
            try:
                await manager.call("mcp__h__echo", {"text": "x"}, None)
            except McpError as exc:
                outcomes.append(str(exc))
            if conn.state == "failed":
                break
            while conn.state == "restarting" and time.monotonic() < conn.next_try:
                await asyncio.sleep(0.05)  # the back-off: a time, not an event
        await asyncio.sleep(0)  # the notices are said on this loop
        state, failures = conn.state, conn.failures
        with pytest.raises(McpError, match="is not available"):
            await manager.call("mcp__h__echo", {"text": "x"}, None)
    finally:
        await manager.close()
        box.close()
    assert outcomes[:3] == ["the MCP server h stopped: it exited (code 3)"] * 3
    assert state == "failed" and failures == 3
    assert said == [
        "MCP server h: it exited (code 3)",  # the first death, once
        "MCP server h: it exited (code 3)",  # and the giving up
    ]
