"""Tokens sent per step on a long task, with and without compaction (issue 29).

A 100-step task (the real agent loop, tools and workspace) against the scripted OpenAI server
(`talos_ls/demo/scripted_model.py`), which counts each request (its body's bytes, four a token)
and, with a context window, refuses one that does not fit with OpenAI's 400. Each step reads a
large file (3,000 lines: the tool result is cut to 8,000 characters), a few propose edits or
queue a question. Without compaction (a window of 100M tokens: never reached) what is sent
grows with every step; with it, it stays under the window.

    .venv/bin/python bench/context_bench.py                 # windows: none, 32768, 8192
    .venv/bin/python bench/context_bench.py --steps 200 --json out.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from talos_ls.agent import tools
from talos_ls.agent.cost import Caps, CostMeter
from talos_ls.agent.loop import AgentLoop, system_prompt
from talos_ls.agent.model import ModelClient, ModelConfig
from talos_ls.agent.sandbox import Sandbox
from talos_ls.agent.tasks import TaskRegistry
from talos_ls.agent.workspace import Workspace
from talos_ls.demo.scripted_model import ScriptedModelServer, reply
from talos_ls.edits.proposals import ProposalBook
from talos_ls.gates.permissions import Policy
from talos_ls.gates.question_queue import QuestionQueue
from talos_ls.memory.facts import FactStore
from talos_ls.store import open_store

NO_COMPACTION = 10**8


def plan(steps: int) -> list[tuple[str, dict]]:
    out: list[tuple[str, dict]] = []
    for k in range(steps - 1):
        if k % 25 == 1:
            edit = {"path": f"src/f{k}.py", "content": f"X = {k}\n"}
            out.append(("propose_edit", edit))
        elif k == 2:
            ask = {"question": "Tabs or spaces?", "options": ["tabs", "spaces"]}
            out.append(("ask", ask))
        else:
            out.append(("read_file", {"path": f"big/m{k % 10}.py"}))
    return out


class Reader:
    def __init__(self, steps: list[tuple[str, dict]]) -> None:
        self.steps = steps
        self.done = 0
        self.summaries = 0

    def __call__(self, body: dict) -> dict:
        if "tools" not in body:
            self.summaries += 1
            return reply("Request: tidy. Proposals: pending. Still to do: the rest.")
        if self.done >= len(self.steps):
            return reply("Done.")
        name, args = self.steps[self.done]
        self.done += 1
        return reply(None, [(f"c{self.done}", name, json.dumps(args))])


async def run(window: int, steps: int, tmp: Path) -> dict:
    root = tmp / f"ws-{window}"
    (root / "big").mkdir(parents=True)
    (root / "src").mkdir()
    for k in range(10):
        lines = [f"def function_{k}_{i}(value):  # a long module, line {i}" for i in range(3000)]
        (root / "big" / f"m{k}.py").write_text("\n".join(lines) + "\n")
    server = ScriptedModelServer(context_window=None if window == NO_COMPACTION else window)
    store = open_store("sqlite:///" + str(tmp / f"talos-{window}.db"))
    meter = CostMeter(prices={})
    registry = TaskRegistry(store, meter)
    facts = FactStore(store)
    config = ModelConfig("fake-model", base_url=server.url, context_window=window)
    loop = AgentLoop(ModelClient(config), meter, Caps(max_steps=10 * steps), registry)
    reader = Reader(plan(steps))
    server.script = [reader] * (20 * steps)
    policy = Policy.load(root, "ask", sandboxed=False, config=tmp / f"config-{window}")

    async def runner(task):  # type: ignore[no-untyped-def]
        ctx = tools.ToolContext(
            agent_id="ws",
            task_id=task.id,
            turn=1,
            workspace=Workspace(root),
            policy=policy,
            proposals=ProposalBook(),
            facts=facts,
            queue=QuestionQueue(store, facts=facts),
            prompter=None,
            skills={},
            on_proposal=None,
            command_timeout=60,
            sandbox=Sandbox(root, bwrap=""),
        )
        return await loop.run(ctx, task, "tidy the big modules", system_prompt())

    started = time.perf_counter()
    task = registry.start("ws", "tidy the big modules", runner)
    await registry.wait(task)
    seconds = time.perf_counter() - started
    await registry.shutdown()
    server.close()
    sizes = [
        size
        for size, request in zip(server.sizes, server.requests, strict=True)
        if "tools" in request["body"]
    ]
    return {
        "window": None if window == NO_COMPACTION else window,
        "state": task.state,
        "steps": len(sizes),
        "summaries": reader.summaries,
        "refused": server.refused,
        "per_step": sizes,
        "max": max(sizes),
        "total": sum(sizes),
        "ms_per_step": 1000 * seconds / max(len(sizes), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--windows", default=f"{NO_COMPACTION},32768,8192")
    parser.add_argument("--json")
    args = parser.parse_args()
    windows = [int(w) for w in args.windows.split(",")]
    print(
        f"{platform.node()} {platform.machine()} {os.cpu_count()} cpus, Python "
        f"{platform.python_version()}, load {os.getloadavg()[0]:.2f}, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    )
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for window in windows:
            results.append(asyncio.run(run(window, args.steps, Path(tmp))))
    marks = [m for m in (1, 10, 25, 50, 75, 100, 150, 200, 300) if m <= args.steps]
    head = " | ".join(f"step {m}" for m in marks)
    print(f"| window | {head} | max | total sent | summaries | 400s | ms/step | state |")
    print("|---" * (len(marks) + 7) + "|")
    for r in results:
        cells = " | ".join(
            f"{r['per_step'][m - 1]:,}" if m <= len(r["per_step"]) else "" for m in marks
        )
        shown = "none (no compaction)" if r["window"] is None else f"{r['window']:,}"
        print(
            f"| {shown} | {cells} | {r['max']:,} | {r['total']:,} | {r['summaries']} | "
            f"{r['refused']} | {r['ms_per_step']:.1f} | {r['state']} |"
        )
    print(f"load after: {os.getloadavg()[0]:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
