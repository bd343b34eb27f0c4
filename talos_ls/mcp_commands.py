"""`talos mcp list` (the MCP servers a workspace uses, each started as a task would start it:
its state and tools) and `talos mcp trust` (the workspace's own `.talos/mcp.json`, trusted as
it is now). `talos doctor` checks the servers with `check_mcp`."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from .agent.limits import Limits
from .agent.sandbox import Sandbox
from .cli_report import CliError
from .display import visible
from .mcp import config as mcp_config
from .mcp.client import McpManager
from .mcp.launch import plan

Check = tuple[bool, str]


def started(
    root: Path, readable: tuple[Path, ...] = (), limits: Limits | None = None
) -> tuple[mcp_config.Loaded, list[dict[str, Any]]]:
    """The configuration, and each usable server started (as a task would, in the sandbox)
    and stopped again: its state, tools and error."""
    loaded = mcp_config.load(root)
    if not loaded.servers:
        return loaded, []
    sandbox = Sandbox(root, readable=readable, limits=limits)
    state = sandbox.probe()

    async def probe() -> list[dict[str, Any]]:
        manager = McpManager(
            (lambda server: plan(sandbox, server, readable)) if state.available else None,
            sandbox_problem=state.detail,
        )
        manager.configure(loaded.servers)
        try:
            return await manager.check()
        finally:
            await manager.close()

    try:
        return loaded, asyncio.run(probe())
    finally:
        sandbox.close()


def _readable(args: argparse.Namespace) -> tuple[tuple[Path, ...], Limits | None]:
    effective = getattr(args, "effective", None)
    if effective is None:
        return (), None
    return tuple(effective.readable_paths()), effective.limits()


def list_servers(args: argparse.Namespace, root: Path) -> int:
    readable, limits = _readable(args)
    loaded, servers = started(root, readable, limits)
    if args.json:
        print(
            json.dumps(
                {
                    "servers": servers,
                    "untrusted": [s.name for s in loaded.untrusted],
                    "problems": loaded.problems,
                },
                indent=2,
            )
        )
        return 0
    for row in servers:
        print(f"{row['name']}  [{row['state']}]  from {row['source']}")
        print(f"  {visible(row['describe'], single_line=True)}")
        if row["tools"]:
            print(f"  tools: {', '.join(row['tools'])}")
        if row["error"]:
            print(f"  {visible(row['error'], single_line=True)}")
    for server in loaded.untrusted:
        print(f"{server.name}  [not trusted]  from {server.source}")
        print(f"  {server.describe()}")
    if loaded.untrusted:
        print(
            f"The workspace's {mcp_config.MCP_FILE} is not trusted: it starts nothing until "
            "you trust it (talos mcp trust)."
        )
    for problem in loaded.problems:
        print(f"problem: {visible(problem, single_line=True)}", file=sys.stderr)
    if not servers and not loaded.untrusted:
        print(
            f"no MCP servers configured ({mcp_config.USER_FILE} in your Talos config "
            f"directory, or {mcp_config.MCP_FILE} in the workspace)"
        )
    return 1 if loaded.problems else 0


def trust(root: Path) -> int:
    loaded = mcp_config.load(root)
    if loaded.workspace_sha256 is None:
        raise CliError("mcp", f"there is no readable {mcp_config.MCP_FILE} in {root}")
    if not loaded.untrusted:
        print(f"{mcp_config.MCP_FILE} is trusted already (or names no server)")
        return 0
    mcp_config.trust(root, loaded.workspace_sha256)
    for s in loaded.untrusted:
        print(f"trusted: {s.name}: {s.describe()}")
    print("trusted this exact content; any change to the file makes it untrusted again")
    return 0


def check_mcp(
    root: Path, readable: tuple[Path, ...] = (), limits: Limits | None = None
) -> list[Check]:
    """`talos doctor`: each configured server starts and lists its tools."""
    try:
        loaded, servers = started(root, readable, limits)
    except Exception as exc:  # a check reports, it never raises
        return [(False, f"MCP servers: could not be checked ({type(exc).__name__})")]
    checks: list[Check] = [(False, f"MCP: {p}") for p in loaded.problems]
    for s in servers:
        if s["state"] == "ready":
            checks.append((True, f"MCP server {s['name']}: starts, {len(s['tools'])} tools"))
        else:
            said = visible(s["error"], single_line=True)
            checks.append((False, f"MCP server {s['name']}: {said}"))
    if loaded.untrusted:
        names = ", ".join(s.name for s in loaded.untrusted)
        checks.append(
            (
                True,
                f"MCP: {mcp_config.MCP_FILE} not trusted, so {names} not started (talos mcp trust)",
            )
        )
    return checks
