"""An MCP tool call's overhead in Talos over calling the same server directly with the SDK.

The same server, the same tool, the same arguments, N calls each way, interleaved (one call
of each per round, so drift on the machine hits them alike):
- direct: the SDK's own `stdio_client` + `ClientSession.call_tool`, unsandboxed, on the
  caller's loop (what any MCP client does);
- talos: `McpManager.call` (the server under bubblewrap, the session on the manager's own
  thread, our bounded stdio transport), then what `agent/tools.py` adds to every call: the
  permission decision (`Policy.authorize_tool`, allowed by a rule), the result rendered
  (`adapt.render`), redacted and capped.
Start-up is timed too (spawn, initialize, list tools), once per run each way.

    python bench/mcp_bench.py                      # our plain test server (Python)
    python bench/mcp_bench.py --calls 500
    python bench/mcp_bench.py --server node_modules/.bin/mcp-server-everything --arg stdio \\
        --tool echo --args '{"message": "hi"}'
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from talos_ls.agent.sandbox import Sandbox
from talos_ls.agent.tools import _truncate
from talos_ls.gates.permissions import Policy
from talos_ls.mcp.adapt import render
from talos_ls.mcp.client import McpManager
from talos_ls.mcp.config import parse_server
from talos_ls.mcp.launch import plan
from talos_ls.redact import redact

PLAIN = Path(__file__).resolve().parents[1] / "tests" / "mcp" / "hostile" / "server.py"


def ms(values: list[float]) -> str:
    values = sorted(values)
    p90 = values[int(len(values) * 0.9) - 1]
    return f"median {statistics.median(values) * 1000:.2f} ms, p90 {p90 * 1000:.2f} ms"


async def main(args: argparse.Namespace) -> dict:
    command = args.server or sys.executable
    argv = [*([] if args.server else [str(PLAIN), "plain"]), *args.arg]
    arguments = json.loads(args.args)
    full = f"mcp__b__{args.tool}"
    with tempfile.TemporaryDirectory(prefix="talos-mcp-bench-") as tmp:
        ws = Path(tmp) / "ws"
        ws.mkdir()
        sandbox = Sandbox(ws)
        if not sandbox.probe().available:
            raise SystemExit("needs bubblewrap able to create its namespaces here")
        server = parse_server("b", {"command": command, "args": argv}, "bench", {})
        policy = Policy(mode="ask", tools={"allow": ["mcp__b__*"]}, root=ws)
        manager = McpManager(lambda s: plan(sandbox, s))
        manager.configure([server])
        direct_times: list[float] = []
        talos_times: list[float] = []
        started = time.perf_counter()
        tools = await manager.tools()
        talos_start = time.perf_counter() - started
        assert any(t.full == full for t in tools), [t.full for t in tools]
        params = StdioServerParameters(command=command, args=argv)
        started = time.perf_counter()
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await session.list_tools()
            direct_start = time.perf_counter() - started
            for _ in range(args.warmup):
                await session.call_tool(args.tool, arguments)
                await manager.call(full, arguments, None)
            for _ in range(args.calls):
                t0 = time.perf_counter()
                await session.call_tool(args.tool, arguments)
                direct_times.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                decision = await policy.authorize_tool(full, "b", json.dumps(arguments), None)
                assert decision.verdict == "allow"
                result, _ = await manager.call(full, arguments, None)
                text, _ = render(result)
                _truncate(redact(text))
                talos_times.append(time.perf_counter() - t0)
        await manager.close()
        sandbox.close()
    overhead = statistics.median(talos_times) - statistics.median(direct_times)
    report = {
        "server": " ".join([command, *argv]),
        "calls": args.calls,
        "start_direct_s": round(direct_start, 3),
        "start_talos_s": round(talos_start, 3),
        "direct": ms(direct_times),
        "talos": ms(talos_times),
        "overhead_median_ms": round(overhead * 1000, 2),
    }
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--server", help="a server program (default: tests/mcp/hostile plain)")
    parser.add_argument("--arg", action="append", default=[], help="an argument for it")
    parser.add_argument("--tool", default="echo")
    parser.add_argument("--args", default='{"text": "hello"}', help="the tool's arguments, JSON")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--json", metavar="PATH")
    options = parser.parse_args()
    out = asyncio.run(main(options))
    for key, value in out.items():
        print(f"{key:20} {value}")
    if options.json:
        Path(options.json).write_text(json.dumps(out, indent=2))
