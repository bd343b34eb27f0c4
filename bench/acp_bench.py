"""The ACP surface (`talos-ls --acp`) against the LSP surface on the same turn, in the same run.

Real processes over stdio, the scripted model (`ScriptedModelServer`) in a process of its own,
answering at once; sessions interleaved ACP / LSP so that the machine's load falls on both
alike. The ACP client is a plain newline-delimited JSON-RPC client here (answering
`fs/read_text_file` from the disk and allowing what it is asked); the LSP client is
`bench/lsp_bench.py`'s (pytest-lsp), with `conversation: true` so that the model's text
streams to it as `talos/conversation` events, as it streams to an ACP client as
`agent_message_chunk`s.

1. *first chunk*: the process spawned and `initialize` sent at once -> the first
   `agent_message_chunk` of the first prompt (ACP: `initialize`, `session/new`,
   `session/prompt` each sent as soon as the previous answer came); LSP: `initialize`,
   `initialized`, `talos.task.start` at once -> the first `talos/conversation` text. Also
   prompt sent -> first chunk for that first prompt and for a second one (warm), and spawn ->
   `initialize` answered.
2. *per-step overhead*: a task of N `read_file` steps (`src/app.py`) and a final answer; a
   step's time is the interval between two requests' arrivals at the scripted model (stamped
   there, as in lsp_bench's figure 10). ACP with the client's `fs` capability (each read goes
   to the client: one round trip a step), ACP without it (the agent reads the disk), LSP.

    .venv/bin/python bench/acp_bench.py                 # 10 starts, 5 x 50 steps
    .venv/bin/python bench/acp_bench.py --quick          # a smoke run
    .venv/bin/python bench/acp_bench.py --json out.json
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lsp_bench import (  # bench/lsp_bench.py, beside this script
    PROMPT,
    REPO,
    WAIT_S,
    Model,
    Session,
    machine,
    make_small_workspace,
    plain,
    server_env,
    summary,
)


# ------------------------------------------------------------------------ the ACP client
class AcpSession:
    """`talos-ls --acp` and a minimal client: every message stamped on arrival."""

    def __init__(self, home: Path, root: Path = REPO, fs: bool = True) -> None:
        self.home = home
        self.root = root
        self.fs = fs
        self.proc: asyncio.subprocess.Process | None = None
        self.pending: dict[int, asyncio.Future[Any]] = {}
        self.updates: list[tuple[float, dict[str, Any]]] = []
        self.stderr_lines: list[str] = []
        self.client_requests = 0
        self.next_id = 0
        self.t_spawn = 0.0
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self, config: str) -> None:
        cfg = self.home / "config" / "talos" / "config.toml"
        cfg.parent.mkdir(parents=True, exist_ok=True)
        cfg.write_text(config)
        self.t_spawn = time.perf_counter()
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "talos_ls.server",
            "--acp",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=server_env(self.home, self.root),
            cwd=self.root,
            limit=64 * 1024 * 1024,
        )
        self._tasks = [
            asyncio.create_task(self._read()),
            asyncio.create_task(self._stderr()),
        ]

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        self.next_id += 1
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending[self.next_id] = future
        self._send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        return await asyncio.wait_for(future, WAIT_S)

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            now = time.perf_counter()
            msg = json.loads(line)
            if "method" in msg and "id" in msg:
                self.client_requests += 1
                self._send({"jsonrpc": "2.0", "id": msg["id"], "result": self._answer(msg)})
            elif "method" in msg:
                if msg["method"] == "session/update":
                    self.updates.append((now, msg["params"]))
            elif msg.get("id") in self.pending:
                future = self.pending.pop(msg["id"])
                if "error" in msg:
                    future.set_exception(RuntimeError(f"ACP error: {msg['error']}"))
                else:
                    future.set_result(msg["result"])
        for future in self.pending.values():
            if not future.done():
                future.set_exception(RuntimeError("the agent's stdout closed"))

    async def _stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        while line := await self.proc.stderr.readline():
            self.stderr_lines.append(line.decode(errors="replace").rstrip("\n"))

    def _answer(self, msg: dict[str, Any]) -> Any:
        params = msg.get("params") or {}
        if msg["method"] == "fs/read_text_file":
            return {"content": Path(params["path"]).read_text()}
        if msg["method"] == "fs/write_text_file":
            Path(params["path"]).write_text(params["content"])
            return {}
        if msg["method"] == "session/request_permission":
            allow = next(o for o in params["options"] if o["kind"] == "allow_once")
            return {"outcome": {"outcome": "selected", "optionId": allow["optionId"]}}
        return {"action": "cancel"}  # elicitation: not in these turns

    async def initialize(self) -> Any:
        caps = {"fs": {"readTextFile": self.fs, "writeTextFile": self.fs}, "terminal": False}
        return await self.request("initialize", {"protocolVersion": 1, "clientCapabilities": caps})

    def first_chunk_after(self, t0: float) -> float | None:
        return next(
            (
                t
                for t, p in self.updates
                if t >= t0 and p["update"].get("sessionUpdate") == "agent_message_chunk"
            ),
            None,
        )

    async def until(self, check: Callable[[], Any], what: str) -> Any:
        deadline = time.perf_counter() + WAIT_S
        while not (value := check()):
            if time.perf_counter() > deadline:
                raise TimeoutError(f"acp: timed out waiting for {what}")
            await asyncio.sleep(0.001)
        return value

    async def close(self) -> None:
        """stdin closed, as a client that goes away; killed when it does not exit."""
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), WAIT_S)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
        for task in self._tasks:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(task, 5)


# --------------------------------------------------------------------------- the bench
class Bench:
    def __init__(self, work: Path, root: Path = REPO) -> None:
        self.work = work
        self.root = root  # the checkout of talos_ls both surfaces run (PYTHONPATH)
        self.model = Model()
        self.small = make_small_workspace(work / "small")
        self.runs = 0
        self.stderr: dict[str, list[str]] = {}

    def home(self) -> Path:
        self.runs += 1
        return self.work / "home" / str(self.runs)

    def store(self, label: str) -> str:
        return "sqlite:///" + str(self.work / f"store-{label}.db")

    def acp_config(self, label: str, max_steps: int = 50) -> str:
        return (
            'model = "fake-model"\n'
            f'base_url = "{self.model.url}"\n'
            f'store = "{self.store(label)}"\n'
            f"max_steps = {max_steps}\n"
            "context_window = 100000000\n"
            '[prices."fake-model"]\ninput = 1\ncached_input = 0.5\noutput = 2\n'
        )

    def lsp_options(self, label: str, max_steps: int = 50) -> dict[str, Any]:
        return {
            "model": "fake-model",
            "baseUrl": self.model.url,
            "storeUrl": self.store(label),
            "prices": {"fake-model": {"input": 1, "cached_input": 0.5, "output": 2}},
            "contextWindow": 100_000_000,
            "maxSteps": max_steps,
            "conversation": True,
        }

    async def lsp_session(self, label: str, max_steps: int = 50) -> tuple[Session, list]:
        s = Session("lsp", self.home(), self.root)
        texts: list[tuple[float, dict[str, Any]]] = []

        @s.client.feature("talos/conversation")
        def on_conversation(ls: Any, params: Any) -> None:
            event = plain(params)
            texts.append((time.perf_counter(), event))

        argv = [sys.executable, "-m", "talos_ls.server"]
        await s.start(argv, [self.small], self.lsp_options(label, max_steps))
        return s, texts

    @staticmethod
    def first_text(texts: list, task_id: str) -> float | None:
        return next(
            (t for t, e in texts if e.get("task_id") == task_id and e.get("kind") == "text"),
            None,
        )

    # ------------------------------------------------------------------ 1
    async def acp_first_chunk(self, label: str) -> dict[str, float]:
        s = AcpSession(self.home(), self.root)
        await s.start(self.acp_config(label))
        await s.initialize()
        t_init = time.perf_counter()
        sid = (await s.request("session/new", {"cwd": str(self.small), "mcpServers": []}))[
            "sessionId"
        ]
        out = {"spawn_to_initialized": t_init - s.t_spawn}
        for turn in ("cold", "warm"):
            t0 = time.perf_counter()
            prompt = s.request(
                "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": PROMPT}]}
            )
            task = asyncio.ensure_future(prompt)
            t_chunk = await s.until(lambda t0=t0: s.first_chunk_after(t0), "the first chunk")
            done = await task
            if done.get("stopReason") != "end_turn":
                raise RuntimeError(f"acp: the turn ended {done}")
            out[f"prompt_to_chunk_{turn}"] = t_chunk - t0
            if turn == "cold":
                out["spawn_to_first_chunk"] = t_chunk - s.t_spawn
        await s.close()
        if s.stderr_lines:
            self.stderr[f"acp:{label}"] = s.stderr_lines
        return out

    async def lsp_first_text(self, label: str) -> dict[str, float]:
        s, texts = await self.lsp_session(label)
        out = {"spawn_to_initialized": s.t_initialized - s.t_spawn}
        for turn in ("cold", "warm"):
            t0 = time.perf_counter()
            tid = (await s.command("talos.task.start", {"prompt": PROMPT}))["task_id"]
            t_text = await s.until(lambda tid=tid: self.first_text(texts, tid), "text")
            _, message = await s.until(lambda tid=tid: s.end_at(tid), "the task's end")
            if not message.startswith("done"):
                raise RuntimeError(f"lsp: the task ended {message!r}")
            out[f"prompt_to_chunk_{turn}"] = t_text - t0
            if turn == "cold":
                out["spawn_to_first_chunk"] = t_text - s.t_spawn
        await s.close()
        return out

    async def first_chunk(self, reps: int) -> dict[str, Any]:
        print(f"[1] spawn + initialize -> first chunk, {reps} starts each (+1 warm-up)", flush=True)
        runs: dict[str, list[dict[str, float]]] = {"acp": [], "lsp": []}
        for rep in range(reps + 1):
            order = ("acp", "lsp") if rep % 2 else ("lsp", "acp")
            for kind in order:
                self.model.send(op="clear")
                self.model.send(op="reply", text="ok, here is the answer", times=2)
                label = f"first-{kind}-{rep}"
                got = await (self.acp_first_chunk if kind == "acp" else self.lsp_first_text)(label)
                if rep:
                    runs[kind].append(got)
        keys = runs["acp"][0].keys()
        return {kind: {k: summary([r[k] for r in rs]) for k in keys} for kind, rs in runs.items()}

    # ------------------------------------------------------------------ 2
    def arrivals(self, since: int, steps: int) -> list[float]:
        got = self.model.send(op="arrivals", since=since)["arrivals"]
        if len(got) != steps + 1:
            raise RuntimeError(f"[2] {len(got)} model calls, not {steps + 1}")
        return [b - a for a, b in itertools.pairwise(got)]

    async def acp_steps(self, label: str, steps: int, fs: bool) -> tuple[list[float], int]:
        s = AcpSession(self.home(), self.root, fs=fs)
        await s.start(self.acp_config(label, steps + 10))
        await s.initialize()
        sid = (await s.request("session/new", {"cwd": str(self.small), "mcpServers": []}))[
            "sessionId"
        ]
        await asyncio.sleep(0.5)
        since = self.model.requests()
        done = await s.request(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": PROMPT}]}
        )
        if done.get("stopReason") != "end_turn":
            raise RuntimeError(f"[2] acp: the turn ended {done}")
        times = self.arrivals(since, steps)
        await s.close()
        return times, s.client_requests

    async def lsp_steps(self, label: str, steps: int) -> list[float]:
        s, _ = await self.lsp_session(label, steps + 10)
        await asyncio.sleep(0.5)
        since = self.model.requests()
        tid = (await s.command("talos.task.start", {"prompt": PROMPT}))["task_id"]
        _, message = await s.until(lambda: s.end_at(tid), "the task's end")
        if not message.startswith("done"):
            raise RuntimeError(f"[2] lsp: the task ended {message!r}")
        times = self.arrivals(since, steps)
        await s.close()
        return times

    async def step_cost(self, reps: int, steps: int) -> dict[str, Any]:
        print(f"[2] a {steps}-step task (read_file each step), {reps} runs each", flush=True)
        arguments = json.dumps({"path": "src/app.py"})
        times: dict[str, list[list[float]]] = {"acp_fs": [], "acp_disk": [], "lsp": []}
        client_requests: list[int] = []
        for rep in range(reps + 1):
            for kind in times:
                self.model.send(op="clear")
                self.model.send(op="steps", n=steps, name="read_file", arguments=arguments)
                label = f"steps-{kind}-{rep}"
                if kind == "lsp":
                    got = await self.lsp_steps(label, steps)
                else:
                    got, asked = await self.acp_steps(label, steps, fs=kind == "acp_fs")
                    if kind == "acp_fs" and rep:
                        client_requests.append(asked)
                if rep:
                    times[kind].append(got)
        medians = {
            kind: [statistics.median(run[k] for run in runs) * 1000 for k in range(steps)]
            for kind, runs in times.items()
        }
        return {
            "steps": steps,
            "reps": reps,
            "median_step_ms": medians,
            "mean_step_ms": {k: statistics.mean(v[1:]) for k, v in medians.items()},
            "client_requests_per_task_acp_fs": client_requests,
        }

    def close(self) -> None:
        self.model.close()


def table(results: dict[str, Any]) -> list[str]:
    out = ["", "| figure | ACP | LSP (anchor) |", "|---|---:|---:|"]
    if "first_chunk" in results:
        fc = results["first_chunk"]
        rows = [
            ("spawn -> initialize answered, median ms", "spawn_to_initialized"),
            ("spawn + initialize -> first chunk, median ms", "spawn_to_first_chunk"),
            ("first prompt sent -> first chunk, median ms", "prompt_to_chunk_cold"),
            ("second prompt sent -> first chunk, median ms", "prompt_to_chunk_warm"),
        ]
        for title, key in rows:
            out.append(
                f"| 1. {title} | {fc['acp'][key]['median']:.1f} | {fc['lsp'][key]['median']:.1f} |"
            )
    if "step_cost" in results:
        sc = results["step_cost"]
        m = sc["median_step_ms"]
        n = sc["steps"]
        for label, k in ((f"step 5 of {n}", 4), (f"step {n} of {n}", n - 1)):
            out.append(
                f"| 2. {label}, median ms | {m['acp_fs'][k]:.2f} (fs) / {m['acp_disk'][k]:.2f} "
                f"(disk) | {m['lsp'][k]:.2f} |"
            )
        mean = sc["mean_step_ms"]
        out.append(
            f"| 2. mean step (2..{n}), ms | {mean['acp_fs']:.2f} (fs) / {mean['acp_disk']:.2f} "
            f"(disk) | {mean['lsp']:.2f} |"
        )
    return out


async def run(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {"machine": machine()}
    with contextlib.suppress(Exception):
        results["commit"] = subprocess.run(
            ["git", "-C", str(args.root), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
        ).stdout.strip()
    work = Path(tempfile.mkdtemp(prefix="acp-bench-"))
    bench = Bench(work, args.root)
    only = set(args.only.split(",")) if args.only else {"1", "2"}
    try:
        if "1" in only:
            results["first_chunk"] = await bench.first_chunk(3 if args.quick else 10)
        if "2" in only:
            results["step_cost"] = await bench.step_cost(1 if args.quick else 5, args.steps)
    finally:
        bench.close()
        results["server_stderr"] = bench.stderr
        results["loadavg_end"] = os.getloadavg()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: few repetitions")
    parser.add_argument("--only", help="figures to run, e.g. 1")
    parser.add_argument("--steps", type=int, default=50, help="figure 2: steps a task (50)")
    parser.add_argument("--json", metavar="PATH", help="write every figure here")
    parser.add_argument(
        "--root",
        type=lambda p: Path(p).resolve(),
        default=REPO,
        help="the checkout of talos_ls to run (default: this one)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args()
    results = asyncio.run(run(args))
    m = results["machine"]
    print(
        f"\n{m['nproc']} CPUs ({m['cpu']}), {m['mem_gib']} GiB, Linux {m['kernel']}, Python "
        f"{m['python']}, {m['date']}, commit {results.get('commit')}, load average "
        f"{m['loadavg'][0]:.2f} at the start, {results['loadavg_end'][0]:.2f} at the end"
    )
    print("\n".join(table(results)))
    for where, lines in results["server_stderr"].items():
        print(f"agent stderr ({where}), {len(lines)} lines; first:")
        for line in lines[:8]:
            print("   ", line[:200])
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
