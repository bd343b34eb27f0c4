"""Load and scale: the real `talos-ls` process on a large workspace, under many tasks at once,
and over a long run of tasks.

Driven as `bench/lsp_bench.py` drives it, with its helpers (the client, the session, the
scripted model in a process of its own, the workspace generator, VmRSS from /proc):

1. scale, on a generated workspace of 100,000 files: `initialized` -> the first status with
   `index.ready`; the server's RSS and its file watcher's (`python -m talos_ls.watch`, a
   child of the server) once ready; a change on disk (a file added, deleted; a directory of
   100 files moved in, written in place, removed) -> the first `talos/status` whose folder's
   `index.files` reflects it; the `search` tool, through tasks whose scripted model calls it
   (task time minus a baseline task calling `read_file` on one small file) and `search()`
   called in this process, a common word and a miss; the server's RSS sampled every 20 ms
   while the searches run;
2. twenty tasks started at once on one daemon, each model reply streamed over about 1 s:
   wall time until the last ends, the most running at once, codeAction latency on an open
   document meanwhile, the server's peak RSS;
3. a soak: 1,000 tasks one after the other, each answered with about 2,000 characters and a
   usage block; the server's RSS every 50 tasks, its growth after a 50-task warm-up, tasks
   per second.

    .venv/bin/python bench/load_bench.py                     # 100,000 files, 1,000 tasks
    .venv/bin/python bench/load_bench.py --quick             # 2,000 files, 100 tasks
    .venv/bin/python bench/load_bench.py --only 2,3 --json out.json
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

from lsp_bench import (  # bench/lsp_bench.py, beside this script
    REPO,
    Bench,
    Session,
    children,
    finish,
    machine,
    make_workspace,
    rss_kb,
    summary,
    wind_up,
)

sys.path.insert(0, str(REPO))

from talos_ls.agent.search import search
from talos_ls.agent.workspace import Workspace

KIB = 1024
CONCURRENT = 20
SOAK_WARMUP = 50
SOAK_ROWS = (50, 100, 250, 500, 750, 1000)
USAGE = (1000, 100, 0)  # as tests/load/test_load.py: $0.0012 a call at the bench's prices
CALL_COST = Decimal("0.0012")
ANSWER = "The function returns early when its input is empty, so the loop below never sees None. "
COMMON, MISS = "return", "zqxjv_nowhere"


# --------------------------------------------------------------------------- helpers
class RssSampler:
    """VmRSS of one process every `interval` seconds, in a thread of this process (VmHWM
    would be the peak of the process's whole life)."""

    def __init__(self, pid: int, interval: float = 0.02) -> None:
        self.pid = pid
        self.interval = interval
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        path = Path(f"/proc/{self.pid}/status")
        while not self._stop.is_set():
            with contextlib.suppress(OSError, ValueError):
                for line in path.read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        self.samples.append((time.perf_counter(), int(line.split()[1])))
                        break
            self._stop.wait(self.interval)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def peak_kb(self) -> int:
        return max((kb for _, kb in self.samples), default=0)


def watcher_pid(server: int) -> int | None:
    """The server's file watcher: its child running `python -m talos_ls.watch`."""
    for pid in children(server):
        with contextlib.suppress(OSError):
            if b"talos_ls.watch" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return pid
    return None


def folder_files(status: Any) -> int | None:
    folders = status.get("folders") or []
    return folders[0]["index"]["files"] if folders else None


def module(i: int) -> str:
    return f'"""Added {i}."""\n\n\ndef added_{i}(x):\n    return x + {i}\n'


def mib(kb: float) -> float:
    return kb / KIB


def git_commit() -> str:
    with contextlib.suppress(OSError, subprocess.CalledProcessError):
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=REPO,
            check=True,
            capture_output=True,
            text=True,
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "talos_ls"],
            cwd=REPO,
            capture_output=True,
            text=True,
        ).stdout.strip()
        return out.stdout.strip() + (" (talos_ls/ modified)" if dirty else "")
    return "?"


# --------------------------------------------------------------------------- the bench
class LoadBench(Bench):
    async def files_now(self, s: Session) -> int:
        status = await s.command("talos.status", {})
        return folder_files(status)

    async def reflected(self, s: Session, since: int, files: int, what: str) -> float:
        """Arrival time of the first status after `since` (an index into the statuses) whose
        folder counts `files` files."""
        t, _ = await s.until(
            lambda: next(
                ((t, st) for t, st in s.statuses[since:] if folder_files(st) == files), None
            ),
            what,
            timeout=30.0,
        )
        return t

    async def change(self, s: Session, do: Any, files: int, what: str) -> float:
        """Run `do()` (a change on disk); seconds from its return to the status showing
        `files` files; then a pause, so the next change is a batch of its own."""
        since = len(s.statuses)
        do()
        t0 = time.perf_counter()
        t = await self.reflected(s, since, files, what)
        await asyncio.sleep(0.3)
        return t - t0

    async def run_task(self, s: Session, prompt: str) -> tuple[float, str, str]:
        """One task, started and waited for: (seconds from start sent to progress end, the
        end's message, task id)."""
        t0 = time.perf_counter()
        tid = (await s.command("talos.task.start", {"prompt": prompt}))["task_id"]
        t_end, message = await s.until(lambda: s.end_at(tid), f"the end of {tid}")
        return t_end - t0, message, tid

    # ------------------------------------------------------------------ 1
    async def scale(self, size: int, reps: int, search_reps: int) -> dict[str, Any]:
        root = self.work / f"ws-{size}"
        t0 = time.perf_counter()
        written = make_workspace(root, size)
        gen_s = time.perf_counter() - t0
        print(
            f"[1] {written:,} files (generated in {gen_s:.1f} s): index, watcher, search",
            flush=True,
        )
        s, _ = await self.session("talos", root, f"scale-{size}")
        out: dict[str, Any] = {"files_written": written, "generate_s": gen_s}
        t_ready, st = await self.wait_index(s)
        out["index_ready_s"] = t_ready - s.t_initialized
        out["files_indexed"] = folder_files(st)
        await asyncio.sleep(1.0)
        watcher = watcher_pid(s.pid)
        out["rss_ready_mb"] = mib(rss_kb(s.pid)["VmRSS"])
        out["watcher_rss_mb"] = mib(rss_kb(watcher)["VmRSS"]) if watcher else None
        print(
            f"    index ready in {out['index_ready_s']:.2f} s, {out['files_indexed']:,} "
            f"files; RSS {out['rss_ready_mb']:.1f} MiB, watcher "
            f"{out['watcher_rss_mb'] or 0:.1f} MiB",
            flush=True,
        )

        # The watcher is up once a change shows (it starts before the index scan).
        d0 = root / "src" / "p0" / "m0" / "d0"
        base = await self.files_now(s)
        for k in range(20):
            (d0 / f"warm_{k}.py").write_text(module(k))
            with contextlib.suppress(TimeoutError):
                await s.until(
                    lambda: (
                        (n := folder_files(s.statuses[-1][1]) if s.statuses else None) and n > base
                    ),
                    "the watcher",
                    3.0,
                )
                break
        for warm in d0.glob("warm_*.py"):
            warm.unlink()
        await s.until(
            lambda: s.statuses and folder_files(s.statuses[-1][1]) == base,
            "the warm-up undone",
            30.0,
        )
        await asyncio.sleep(0.5)

        times: dict[str, list[float]] = {
            k: []
            for k in (
                "file_added",
                "file_deleted",
                "dir_moved_in",
                "dir_removed",
                "dir_written",
                "dir_written_removed",
            )
        }
        staging = self.work / "staging"
        staging.mkdir(exist_ok=True)
        write_s = []
        for rep in range(reps):
            n = await self.files_now(s)
            new = d0 / f"new_{rep}.py"
            times["file_added"].append(
                await self.change(
                    s, lambda new=new, rep=rep: new.write_text(module(rep)), n + 1, "a file added"
                )
            )
            times["file_deleted"].append(await self.change(s, new.unlink, n, "a file deleted"))

            pkg = staging / f"pkg_{rep}"
            pkg.mkdir()
            for i in range(100):
                (pkg / f"m{i}.py").write_text(module(i))
            moved = root / "src" / "p1" / f"pkg_{rep}"
            times["dir_moved_in"].append(
                await self.change(
                    s, lambda pkg=pkg, moved=moved: pkg.rename(moved), n + 100, "a directory in"
                )
            )
            times["dir_removed"].append(
                await self.change(
                    s, lambda moved=moved: shutil.rmtree(moved), n, "a directory removed"
                )
            )

            def write_dir(rep: int = rep) -> None:
                t = time.perf_counter()
                where = root / "src" / "p2" / f"gen_{rep}"
                where.mkdir()
                for i in range(100):
                    (where / f"m{i}.py").write_text(module(i))
                write_s.append(time.perf_counter() - t)

            gen = root / "src" / "p2" / f"gen_{rep}"
            times["dir_written"].append(await self.change(s, write_dir, n + 100, "written"))
            times["dir_written_removed"].append(
                await self.change(s, lambda gen=gen: shutil.rmtree(gen), n, "removed")
            )
        out["watch_ms"] = {k: summary(v) for k, v in times.items()}
        out["dir_write_ms"] = summary(write_s)
        out["rss_after_watching_mb"] = mib(rss_kb(s.pid)["VmRSS"])
        out["watcher_rss_after_mb"] = mib(rss_kb(watcher)["VmRSS"]) if watcher else None
        print(
            "    watching: "
            + ", ".join(
                f"{k} {v['median']:.0f}/{v['max']:.0f} ms" for k, v in out["watch_ms"].items()
            ),
            flush=True,
        )

        out["search"] = await self.search_figures(s, root, f"scale-{size}", search_reps)
        await self.finish(s, f"scale-{size}")
        shutil.rmtree(root, ignore_errors=True)
        return out

    def tool_result(self, label: str, task_id: str) -> str:
        """What the model was given as the task's (last) tool result, from the store."""
        from talos_ls.store import open_store

        store = open_store("sqlite:///" + str(self.work / f"store-{label}.db"))
        try:
            row = store.task_get(task_id) or {}
        finally:
            store.close()
        tools = [m for m in row.get("transcript") or [] if m.get("role") == "tool"]
        return str(tools[-1].get("content") or "") if tools else ""

    async def search_figures(self, s: Session, root: Path, label: str, reps: int) -> dict[str, Any]:
        variants = (
            ("baseline", "read_file", {"path": "README.md"}),
            ("common", "search", {"pattern": COMMON}),
            ("common_1000", "search", {"pattern": COMMON, "limit": 1000}),
            ("miss", "search", {"pattern": MISS}),
        )
        self.model.send(op="clear")
        self.model.send(op="reply", text="warm")
        await self.run_task(s, "warm up")  # the model client, the first turn's caches
        out: dict[str, Any] = {"through_tasks": {}, "in_process": {}}
        out["rss_before_mb"] = mib(rss_kb(s.pid)["VmRSS"])
        # Round-robin, the order turned each round, so load from elsewhere hits all alike.
        elapsed: dict[str, list[float]] = {name: [] for name, _, _ in variants}
        spans: dict[str, list[tuple[float, float]]] = {name: [] for name, _, _ in variants}
        ends: dict[str, list[str]] = {name: [] for name, _, _ in variants}
        last: dict[str, str] = {}
        with RssSampler(s.pid) as sampler:
            for rep in range(reps):
                for name, tool, args in variants[rep % 4 :] + variants[: rep % 4]:
                    self.model.send(op="call", name=tool, arguments=json.dumps(args))
                    t0 = time.perf_counter()
                    t, message, last[name] = await self.run_task(s, f"{name} {tool}")
                    elapsed[name].append(t)
                    spans[name].append((t0, t0 + t))
                    ends[name].append(message)
                    await asyncio.sleep(0.05)
        for name, tool, args in variants:
            await s.command("talos.task.show", {"task_id": last[name]})  # the record flushed
            result = self.tool_result(label, last[name])
            hits = len(re.findall(r"^\S+:\d+: ", result, re.M))
            peak = max(
                (kb for at, kb in sampler.samples if any(a <= at <= b for a, b in spans[name])),
                default=0,
            )
            out["through_tasks"][name] = {
                "tool": tool,
                "args": args,
                "task_ms": summary(elapsed[name]),
                "hits": hits,
                "result_chars": len(result),
                "result_cut": "characters cut" in result,
                "not_done": [m for m in ends[name] if not m.startswith("done")],
                "peak_rss_mb": mib(peak),
            }
        out["rss_samples"] = len(sampler.samples)
        base = out["through_tasks"]["baseline"]["task_ms"]["median"]
        for name, v in out["through_tasks"].items():
            v["over_baseline_ms"] = v["task_ms"]["median"] - base
            print(
                f"    search through tasks, {name}: {v['task_ms']['median']:.1f} ms "
                f"({v['over_baseline_ms']:+.1f}), the model got {v['hits']} hits in "
                f"{v['result_chars']:,} characters, peak RSS "
                f"{v['peak_rss_mb']:.1f} MiB",
                flush=True,
            )

        ws = Workspace(root)
        for name, pattern, limit, rg in (
            ("common", COMMON, 50, "auto"),
            ("common_1000", COMMON, 1000, "auto"),
            ("miss", MISS, 50, "auto"),
            ("common_re2", COMMON, 50, None),
            ("miss_re2", MISS, 50, None),
        ):
            elapsed, found = [], 0
            for _ in range(2 if name == "miss_re2" else 5):  # seconds each
                t0 = time.perf_counter()
                hits = await search(ws, pattern, ".", limit, rg=rg)
                elapsed.append(time.perf_counter() - t0)
                found = len(hits)
            out["in_process"][name] = {
                "ms": summary(elapsed),
                "hits": found,
                "ripgrep": rg is not None,
            }
            print(
                f"    search() in process, {name}: {summary(elapsed)['median']:.1f} ms, "
                f"{found} hits",
                flush=True,
            )
        return out

    # ------------------------------------------------------------------ 2
    async def concurrent(self, n: int, reply_s: float) -> dict[str, Any]:
        print(f"[2] {n} tasks at once, each reply streamed over ~{reply_s:.1f} s", flush=True)
        chunks = 50
        text = ("word " * (7 * chunks))[: 7 * chunks]  # 50 chunks of 7 characters
        self.model.send(op="clear")
        self.model.send(op="reply", text="warm")
        self.model.send(op="reply", text=text, delay=reply_s / (chunks + 4), times=n)
        s, _ = await self.session("talos", self.small, "concurrent")
        await self.wait_index(s)
        uri = s.open_document(self.small / "src" / "app.py")
        await self.run_task(s, "warm up")
        for _ in range(30):
            await s.code_action(uri)
        rss_before = rss_kb(s.pid)["VmRSS"]
        since = len(s.statuses)
        latencies: list[float] = []
        sent: list[float] = []
        ids: list[str] = []

        async def ask() -> None:  # codeActions one after the other until every task ended
            while len(ids) < n or not all(s.end_at(t) for t in ids):
                sent.append(time.perf_counter())
                latencies.append(await s.code_action(uri))

        with RssSampler(s.pid) as sampler:
            t0 = time.perf_counter()
            asking = asyncio.ensure_future(ask())
            started = await asyncio.gather(
                *(s.command("talos.task.start", {"prompt": f"task {i}"}) for i in range(n))
            )
            t_started = time.perf_counter()
            ids.extend(x["task_id"] for x in started)
            await s.until(lambda: all(s.end_at(t) for t in ids), "every task's end", 300.0)
            await asking
        ends = [s.end_at(t) for t in ids]
        wall = max(t for t, _ in ends) - t0
        # The most running at once: from the progress (begin is sent once a task has a slot)
        # and from the statuses' running lists.
        marks = sorted([(s.begin_at(t), 1) for t in ids] + [(e[0], -1) for e in ends])
        at_once = peak_progress = 0
        for _, step in marks:
            at_once += step
            peak_progress = max(peak_progress, at_once)
        peak_status = max(
            (sum(r["state"] == "running" for r in st["running"]) for _, st in s.statuses[since:]),
            default=0,
        )
        listed = {t["id"]: t["state"] for t in await s.command("talos.task.list", {})}
        status = await s.command("talos.status", {})
        await self.finish(s, "concurrent")
        return {
            "tasks": n,
            "reply_s": reply_s,
            "wall_s": wall,
            "all_started_ms": (t_started - t0) * 1000,
            "max_running_progress": peak_progress,
            "max_running_status": peak_status,
            "states": sorted({listed.get(t, "?") for t in ids}),
            "not_done": [m for _, m in ends if not m.startswith("done")],
            "code_action_ms": summary(latencies),
            "code_action_max_sent_at_s": sent[latencies.index(max(latencies))] - t0,
            "code_action_over_10ms": sum(x > 0.010 for x in latencies),
            "code_action_ms_after_start_burst": summary(
                [x for x, at in zip(latencies, sent, strict=True) if at > t_started]
            ),
            "rss_before_mb": mib(rss_before),
            "rss_peak_mb": mib(sampler.peak_kb),
            "running_after": len(status["running"]),
        }

    # ------------------------------------------------------------------ 3
    async def soak(self, n: int) -> dict[str, Any]:
        text = (ANSWER * (2000 // len(ANSWER) + 1))[:2000]
        print(f"[3] a soak of {n} tasks, {len(text):,} characters each", flush=True)
        self.model.send(op="clear")
        self.model.send(op="reply", text=text, usage=list(USAGE), times=n)
        s, _ = await self.session("talos", self.small, "soak")
        await self.wait_index(s)
        samples: list[tuple[int, int]] = [(0, rss_kb(s.pid)["VmRSS"])]
        db = self.work / "store-soak.db"
        db_kb: list[tuple[int, int, int]] = []
        not_done = []
        t0 = time.perf_counter()
        for i in range(1, n + 1):
            _, message, tid = await self.run_task(s, f"soak {i}")
            if not message.startswith("done"):
                not_done.append(message)
            s.progress.pop(f"talos/task/{tid}", None)  # the client's memory is not measured
            s.statuses.clear()
            if i % 50 == 0:
                samples.append((i, rss_kb(s.pid)["VmRSS"]))
                wal = db.with_name(db.name + "-wal")
                db_kb.append(
                    (i, db.stat().st_size // KIB, wal.stat().st_size // KIB if wal.exists() else 0)
                )
                if i % 250 == 0:
                    print(f"    {i} tasks, RSS {mib(samples[-1][1]):.1f} MiB", flush=True)
        wall = time.perf_counter() - t0
        mem = rss_kb(s.pid)
        listed = await s.command("talos.task.list", {})
        status = await s.command("talos.status", {})
        await self.finish(s, "soak")
        rss = dict(samples)
        warm = rss.get(SOAK_WARMUP, samples[-1][1])
        after = [kb for i, kb in samples if i >= SOAK_WARMUP]
        return {
            "tasks": n,
            "chars": len(text),
            "wall_s": wall,
            "tasks_per_s": n / wall,
            "rss_kb": samples,
            "store_kb": db_kb,
            "growth_after_warmup_mb": mib(samples[-1][1] - warm),
            "peak_over_warmup_mb": mib(max(after) - warm),
            "growth_per_task_kb": (samples[-1][1] - warm) / max(1, n - SOAK_WARMUP),
            "growth_50_to_300_mb": mib(rss[300] - warm) if 300 in rss else None,
            "vmhwm_mb": mib(mem["VmHWM"]),
            "not_done": not_done[:5],
            "n_not_done": len(not_done),
            "tasks_listed": len(listed),
            "cost_session": status["cost_session"],
            "cost_expected": str(n * CALL_COST),
        }


# --------------------------------------------------------------------------- report
def table(r: dict[str, Any]) -> list[str]:
    rows = ["| figure | value |", "|---|---:|"]
    sc = r.get("scale")
    if sc:
        n = f"{sc['files_written']:,} files"
        rows += [
            f"| 1. `initialized` -> `index.ready`, {n} ({sc['files_indexed']:,} indexed), s "
            f"| {sc['index_ready_s']:.2f} |",
            f"| 1. server RSS once ready, MiB | {sc['rss_ready_mb']:.1f} |",
            f"| 1. file watcher's RSS (`talos_ls.watch`), MiB | {sc['watcher_rss_mb']:.1f} |",
        ]
        names = {
            "file_added": "a file added",
            "file_deleted": "a file deleted",
            "dir_moved_in": "a directory of 100 files moved in (`mv`)",
            "dir_removed": "that directory removed (`rm -r`)",
            "dir_written": "a directory of 100 files written in place",
            "dir_written_removed": "that directory removed (`rm -r`)",
        }
        for key, name in names.items():
            v = sc["watch_ms"][key]
            rows.append(
                f"| 1. {name} -> status, median / max ms ({v['n']}) | "
                f"{v['median']:.0f} / {v['max']:.0f} |"
            )
        se = sc["search"]
        base = se["through_tasks"]["baseline"]["task_ms"]["median"]
        rows.append(
            f"| 1. task calling `read_file` (baseline), start -> end, median ms | {base:.1f} |"
        )
        what = {
            "common": f"`{COMMON}` (limit 50)",
            "common_1000": f"`{COMMON}` (limit 1000)",
            "miss": "a miss",
        }
        for key, name in what.items():
            v = se["through_tasks"][key]
            rows.append(
                f"| 1. task calling `search` {name}, over the baseline, median ms "
                f"(the model got {v['hits']} hits, {v['result_chars']:,} chars) | "
                f"{v['over_baseline_ms']:.1f} |"
            )
        for key, name in {
            **what,
            "common_re2": f"`{COMMON}`, RE2 fallback (no rg)",
            "miss_re2": "a miss, RE2 fallback (no rg)",
        }.items():
            v = se["in_process"][key]
            rows.append(
                f"| 1. `search()` in process, {name}, median / max ms "
                f"({v['hits']} hits) | {v['ms']['median']:.1f} / {v['ms']['max']:.1f} |"
            )
        peak = max(v["peak_rss_mb"] for v in se["through_tasks"].values())
        rows.append(
            f"| 1. server RSS before the searches / peak during them (20 ms), MiB | "
            f"{se['rss_before_mb']:.1f} / {peak:.1f} |"
        )
    co = r.get("concurrent")
    if co:
        ca = co["code_action_ms"]
        rows += [
            f"| 2. {co['tasks']} tasks at once: first start sent -> last end, s | "
            f"{co['wall_s']:.2f} |",
            f"| 2. most running at once (progress / status) | {co['max_running_progress']} / "
            f"{co['max_running_status']} |",
            f"| 2. codeAction p50 / p99 / max ms meanwhile ({ca['n']} req) | "
            f"{ca['median']:.1f} / {ca['p99']:.1f} / {ca['max']:.1f} |",
            f"| 2. server RSS before / peak, MiB | {co['rss_before_mb']:.1f} / "
            f"{co['rss_peak_mb']:.1f} |",
        ]
    so = r.get("soak")
    if so:
        rss = dict(so["rss_kb"])
        cells = " / ".join(f"{mib(rss[n]):.1f}" for n in SOAK_ROWS if n in rss)
        heads = ", ".join(str(n) for n in SOAK_ROWS if n in rss)
        rows += [
            f"| 3. soak: RSS at {heads} tasks, MiB | {cells} |",
            f"| 3. growth from task {SOAK_WARMUP} to {so['tasks']}, MiB (KiB a task) | "
            f"{so['growth_after_warmup_mb']:.2f} ({so['growth_per_task_kb']:.2f}) |",
            f"| 3. peak over task {SOAK_WARMUP}'s, MiB | {so['peak_over_warmup_mb']:.2f} |",
            f"| 3. tasks per second | {so['tasks_per_s']:.1f} |",
        ]
    return rows


async def run(args: argparse.Namespace) -> dict[str, Any]:
    q = args.quick
    results: dict[str, Any] = {"machine": machine(), "quick": q, "commit": git_commit()}
    work = Path(tempfile.mkdtemp(prefix="load-bench-"))
    bench = LoadBench(work, q)
    only = set(args.only.split(",")) if args.only else {"1", "2", "3"}
    try:
        if "1" in only:
            size = args.files or (2_000 if q else 100_000)
            results["scale"] = await bench.scale(size, 5 if q else 10, 5 if q else 15)
        if "2" in only:
            results["concurrent"] = await bench.concurrent(CONCURRENT, 1.0)
        if "3" in only:
            results["soak"] = await bench.soak(args.tasks or (100 if q else 1000))
    finally:
        wind_up(bench, results, work, args.keep)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2,000 files, 100 soak tasks")
    parser.add_argument("--only", help="figures to run, e.g. 1,3")
    parser.add_argument("--files", type=int, help="workspace size for figure 1")
    parser.add_argument(
        "--tasks",
        type=int,
        help=f"soak tasks for figure 3 (more than the {SOAK_WARMUP} of the warm-up)",
    )
    parser.add_argument("--json", metavar="PATH", help="write every figure here")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args()
    if args.tasks is not None and args.tasks <= SOAK_WARMUP:
        parser.error(f"--tasks must be more than the {SOAK_WARMUP} tasks of the warm-up")
    t0 = time.perf_counter()
    results = asyncio.run(run(args))
    results["bench_s"] = time.perf_counter() - t0
    m = results["machine"]
    print()
    print(
        f"{m['nproc']} CPUs ({m['cpu']}), {m['mem_gib']} GiB, Linux {m['kernel']}, Python "
        f"{m['python']}, pygls {m['pygls']}, commit {results['commit']}, {m['date']}, load "
        f"average {m['loadavg'][0]:.2f} at the start, {results['loadavg_end'][0]:.2f} at the "
        f"end; {results['bench_s']:.0f} s in all"
    )
    print("\n".join(table(results)))
    so = results.get("soak")
    if so:
        print("soak RSS (KiB) by tasks done:", so["rss_kb"])
        print("soak store (tasks done, file KiB, WAL KiB):", so["store_kb"])
        print(
            f"soak: {so['n_not_done']} not done; {so['tasks_listed']} tasks listed; cost "
            f"{so['cost_session']} (expected {so['cost_expected']})"
        )
    co = results.get("concurrent")
    if co:
        print(
            f"concurrent: states {co['states']}, not done {co['not_done']}, all started in "
            f"{co['all_started_ms']:.1f} ms; codeAction max sent "
            f"{co['code_action_max_sent_at_s']:.3f} s after the first start, "
            f"{co['code_action_over_10ms']} over 10 ms, after the starts: "
            f"{co['code_action_ms_after_start_burst']}"
        )
    return finish(results, args.json)


if __name__ == "__main__":
    sys.exit(main())
