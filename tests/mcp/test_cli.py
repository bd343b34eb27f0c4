"""`talos mcp list`, `talos mcp trust` and `talos doctor`'s MCP checks, as real processes."""

from __future__ import annotations

import json

from .conftest import hostile


def test_mcp_list_starts_each_server_and_says_its_state_and_tools(sandbox, person):
    person.servers({"h": hostile("plain"), "gone": {"command": "/nonexistent/srv"}})
    r = person.talos("mcp", "list")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "h  [ready]  from your settings" in lines
    assert "  tools: mcp__h__echo, mcp__h__calls" in lines
    assert "gone  [failed]  from your settings" in lines
    assert (
        "  its program '/nonexistent/srv' is not found (not on the PATH Talos was started "
        "with, and no such file)" in lines
    )
    data = json.loads(person.talos("mcp", "list", "--json").stdout)
    states = {s["name"]: s["state"] for s in data["servers"]}
    assert states == {"h": "ready", "gone": "failed"}


def test_a_broken_configuration_is_named_and_fails_the_listing(person):
    (person.config / "talos" / "mcp.json").write_text('{"mcpServers": {"a__b": {"command": "x"}}}')
    r = person.talos("mcp", "list")
    assert r.returncode == 1
    assert "problem: your settings: the server name 'a__b' must be" in r.stderr


def test_trust_says_what_it_trusts_and_only_that_content(person):
    (person.ws / ".talos").mkdir()
    (person.ws / ".talos" / "mcp.json").write_text(
        json.dumps({"mcpServers": {"h": hostile("plain")}})
    )
    r = person.talos("mcp", "trust")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("trusted: h: runs `")
    again = person.talos("mcp", "trust")
    assert "trusted already" in again.stdout
    (person.ws / ".talos" / "mcp.json").unlink()
    gone = person.talos("mcp", "trust")
    assert gone.returncode == 1 and "there is no readable .talos/mcp.json" in gone.stderr


def test_doctor_checks_each_server(sandbox, person):
    person.servers({"h": hostile("plain"), "gone": {"command": "/nonexistent/srv"}})
    r = person.talos("doctor", "--base-url", "http://127.0.0.1:9/v1")
    lines = r.stdout.splitlines()
    assert "ok      MCP server h: starts, 2 tools" in lines
    assert any(line.startswith("problem MCP server gone: its program") for line in lines)
    assert r.returncode == 1
