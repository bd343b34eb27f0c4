"""Start-up cost of the command sandbox (bubblewrap), per command.

Builds a temporary workspace like a real one (a git repo with one commit, N files in nested
directories, a few `.env*` files, `.git/hooks`, `.talos/`) and times, call by call, the same
`Sandbox.run` the agent uses (the limits, a cgroup where one can be made, the watch): `bash -c
true` unsandboxed, then sandboxed read-only, writable and with network; bwrap alone (a
prebuilt argv spawned the same way) and the argv build alone (the system layout, toolchains,
the `.env*` scan, /etc's secrets), so the split between the Python-side layout and bwrap
itself is visible; and `bash -c 'python3 -c pass'` sandboxed or not. The variants are
interleaved, one call of each per round, so drift on the machine hits them alike. Then the
argv build again on larger workspaces: the `.env*` scan runs before every command.

    python bench/sandbox_bench.py                           # 2,000 files; scan at 2k/20k/100k
    python bench/sandbox_bench.py --files 20000 --runs 100
    python bench/sandbox_bench.py --scan-sizes 2000,100000:2 --json out.json

A size `N:K` in --scan-sizes puts K files per directory (default --files-per-dir); with few
files per directory a large workspace passes MAX_SCANNED_DIRS and the scan stops early.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from talos_ls.agent import limits as limits_mod
from talos_ls.agent import sandbox as sandbox_mod
from talos_ls.agent.sandbox import Sandbox
from talos_ls.agent.secrets_scan import MAX_SCANNED_DIRS

TARGET_MS = 30.0
FANOUT = 6  # subdirectories per directory in the generated tree
ENV_NAMES = (".env", ".env.local", ".env.production", ".env.example", ".env.test")
TIMEOUT_S = 60.0


# ------------------------------------------------------------------------------ workspace
def make_workspace(root: Path, files: int, per_dir: int, commit: bool) -> dict:
    """`files` source files, `per_dir` to a directory, in a tree FANOUT wide (src/pkg3/pkg21/
    ...); `.env*` files at the root and spread through the tree, the last in the last
    directory created; `.talos/` with a rules file; `git init` (hooks, config), and one
    commit if `commit`; every directory last changed an hour ago."""
    root.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    n_dirs = max(1, -(-files // per_dir))
    dirs = [root / "src"]
    for i in range(1, n_dirs):
        dirs.append(dirs[(i - 1) // FANOUT] / f"pkg{i}")
    for d in dirs:
        d.mkdir(parents=True, exist_ok=True)
    body = '"""Generated for the sandbox benchmark."""\n\n\ndef f(x):\n    return x + 1\n'
    for j in range(files):
        (dirs[j % n_dirs] / f"module_{j}.py").write_text(body)
    env_dirs = [root, root, dirs[n_dirs // 3], dirs[2 * n_dirs // 3], dirs[-1]]
    planted = []
    for name, d in zip(ENV_NAMES, env_dirs, strict=True):
        (d / name).write_text("API_KEY=not-a-real-secret\n")
        planted.append(d / name)
    (root / ".talos").mkdir()
    (root / ".talos" / "rules.toml").write_text('[commands]\nallow = ["pytest"]\n')
    (root / "README.md").write_text("# bench workspace\n")
    if commit:
        git = [
            "git",
            "-C",
            str(root),
            "-c",
            "user.name=bench",
            "-c",
            "user.email=b@example.com",
            "-c",
            "commit.gpgsign=false",
        ]
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-q", "-m", "bench"], check=True)
    # As a workspace not all written in the last seconds: a directory changed within the
    # scan's clock tick is read again every time (SecretsScan's "racy" rule).
    hour_ago = time.time() - 3600
    for d in [root, *dirs]:
        os.utime(d, (hour_ago, hour_ago))
    os.sync()  # no writeback of the new files during the timings
    return {"files": files, "dirs": n_dirs, "env_planted": len(planted), "committed": commit}


def scannable_dirs(root: Path) -> int:
    """Directories the `.env*` scan would visit without its cap (all of them, `.git` too)."""
    count, pending = 0, [root]
    while pending:
        here = pending.pop()
        count += 1
        with os.scandir(here) as it:
            for e in it:
                if e.is_dir(follow_symlinks=False):
                    pending.append(Path(e.path))
    return count


# ------------------------------------------------------------------------------- timing
def summary(samples_ns: list[int]) -> dict:
    ms = sorted(s / 1e6 for s in samples_ns)
    return {
        "median_ms": statistics.median(ms),
        "p95_ms": ms[min(len(ms) - 1, int(len(ms) * 0.95))],
        "n": len(ms),
    }


def time_sync(fn: Callable[[], object], runs: int, warmup: int = 5) -> dict:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter_ns()
        fn()
        samples.append(time.perf_counter_ns() - t0)
    return summary(samples)


async def time_interleaved(
    variants: dict[str, Callable[[], Awaitable[None]]], runs: int, warmup: int
) -> dict[str, dict]:
    """One call of each variant per round, `runs` rounds after `warmup` untimed ones."""
    samples: dict[str, list[int]] = {name: [] for name in variants}
    for r in range(warmup + runs):
        for name, call in variants.items():
            t0 = time.perf_counter_ns()
            await call()
            if r >= warmup:
                samples[name].append(time.perf_counter_ns() - t0)
    return {name: summary(s) for name, s in samples.items()}


def walk_etc() -> None:
    """The /etc walk itself (`etc_secrets` keeps its result for 30 s: most calls cost only a
    `stat` of each directory walked, timed in "hidden paths")."""
    sandbox_mod._ETC.clear()
    sandbox_mod.etc_secrets()


def run_call(sb: Sandbox, command: str, **kw) -> Callable[[], Awaitable[None]]:
    async def call() -> None:
        res = await sb.run(command, timeout=TIMEOUT_S, **kw)
        if res.exit_code != 0:
            raise SystemExit(f"{command!r} {kw} failed: {res.text()}")

    return call


def bwrap_call(sb: Sandbox, command: str) -> Callable[[], Awaitable[None]]:
    """bwrap alone: the read-only argv built once, spawned and collected as `Sandbox.run`
    does (same environment, pipes, session), without the per-call layout."""
    argv = sb.argv(command, writable=False, network=False)
    env = sandbox_mod.allowed_env(sandbox_mod.SANDBOX_HOME)

    async def call() -> None:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=sb.root,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        res = await sandbox_mod._collect(proc, TIMEOUT_S, sandbox_mod.MAX_OUTPUT_BYTES)
        if res.exit_code != 0:
            raise SystemExit(f"bwrap {command!r} failed: {res.text()}")

    return call


def bench_mounts(base: Path, counts: list[int], runs: int) -> list[dict]:
    """bwrap alone (`true`, read-only root) with N more mounts of the kind the workspace's
    layout makes, half a directory bound onto itself (a pin), half an empty file over a
    `.env` (a cover): bwrap reads the whole mount table for each mount it makes."""
    empty = base / "empty"
    empty.write_text("")
    out = []
    for n in counts:
        top = base / f"mounts-{n}"
        top.mkdir()
        argv = [
            "bwrap",
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--bind",
            str(top),
            str(top),
        ]
        for i in range(n // 2):
            d = top / f"d{i}"
            d.mkdir()
            (d / ".env").write_text("x")
            argv += ["--bind", str(d), str(d), "--ro-bind", str(empty), str(d / ".env")]
        argv += ["--unshare-all", "--die-with-parent", "--", "true"]
        samples = []
        for r in range(runs + 2):
            t0 = time.perf_counter_ns()
            subprocess.run(argv, check=True)
            if r >= 2:
                samples.append(time.perf_counter_ns() - t0)
        out.append({"mounts": n, **summary(samples)})
    return out


# ------------------------------------------------------------------------------ machine
def machine() -> dict:
    def first(cmd: list[str]) -> str:
        try:
            return subprocess.run(cmd, capture_output=True, text=True).stdout.strip()
        except OSError:
            return "?"

    model = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    mem_kb = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                mem_kb = int(line.split()[1])
    return {
        "nproc": first(["nproc"]),
        "cpu": model,
        "memory_gib": round(mem_kb / 1024**2, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "bwrap": first(["bwrap", "--version"]),
        "date": first(["date", "-u", "+%Y-%m-%d %H:%M UTC"]),
        "loadavg_start": load(),
    }


def provenance() -> dict:
    """Which sandbox.py was measured: its path, the checkout's commit, whether it differs."""
    src = Path(sandbox_mod.__file__).resolve()
    out = {"path": str(src), "sha256": hashlib.sha256(src.read_bytes()).hexdigest()[:12]}
    git = ["git", "-C", str(src.parent)]
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    if head.returncode == 0:
        dirty = subprocess.run(
            [*git, "status", "--porcelain", "--", str(src)], capture_output=True, text=True
        ).stdout.strip()
        out["commit"] = head.stdout.strip() + (" with uncommitted changes" if dirty else "")
    return out


def load() -> str:
    """The 1-minute load average: other work on the machine shows in every figure."""
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


# --------------------------------------------------------------------------------- main
def parse_size(text: str, per_dir: int) -> tuple[int, int]:
    n, _, k = text.partition(":")
    return int(n), int(k) if k else per_dir


def fmt(r: dict, digits: int = 1) -> str:
    return f"{r['median_ms']:,.{digits}f} / {r['p95_ms']:,.{digits}f}"


async def bench_main(args: argparse.Namespace, base: Path) -> dict:
    out: dict = {"machine": machine(), "sandbox_py": provenance(), "args": vars(args)}
    root = base / "workspace"
    print(f"building a {args.files:,}-file workspace ...", file=sys.stderr, flush=True)
    ws = make_workspace(root, args.files, args.files_per_dir, commit=True)
    sb = Sandbox(root)
    ws["scannable_dirs"] = scannable_dirs(sb.root)
    ws["env_found"] = len(sb._env_files())
    ws["argv_len"] = len(sb.argv("true", writable=False, network=False))
    out["workspace"] = ws

    print(f"timing commands, {args.runs} rounds ...", file=sys.stderr, flush=True)
    light = {
        "unsandboxed": run_call(sb, "true", sandboxed=False, writable=False, network=False),
        "read-only": run_call(sb, "true", sandboxed=True, writable=False, network=False),
        "writable": run_call(sb, "true", sandboxed=True, writable=True, network=False),
        "network": run_call(sb, "true", sandboxed=True, writable=False, network=True),
        "bwrap alone": bwrap_call(sb, "true"),
    }
    out["true"] = await time_interleaved(light, args.runs, args.warmup)
    heavy = {
        "unsandboxed": run_call(
            sb, "python3 -c pass", sandboxed=False, writable=False, network=False
        ),
        "read-only": run_call(sb, "python3 -c pass", sandboxed=True, writable=False, network=False),
    }
    out["python"] = await time_interleaved(heavy, args.heavy_runs, min(args.warmup, 3))

    print("timing the argv build ...", file=sys.stderr, flush=True)
    out["layout"] = {
        "argv build": time_sync(
            lambda: sb.argv("true", writable=False, network=False), args.argv_runs
        ),
        "argv build, writable": time_sync(
            lambda: sb.argv("true", writable=True, network=False), args.argv_runs
        ),
        ".env* scan": time_sync(sb._env_files, args.argv_runs),
        "toolchains": time_sync(sb._toolchains, args.argv_runs),
        "hidden paths": time_sync(sb._hidden, args.argv_runs),
        "/etc walk": time_sync(walk_etc, max(5, args.argv_runs // 10)),
    }
    found = limits_mod.hierarchies()
    out["cgroup"] = f"cgroup v{found[0].version}" if found else "none"
    if found:
        out["layout"]["cgroup"] = time_sync(
            lambda: limits_mod.Cage(sb.limits, found).close(), max(5, args.argv_runs // 5)
        )

    out["workspace"]["secrets"] = sb._secrets.mode
    scale = []
    for text in args.scan_sizes.split(","):
        n, per_dir = parse_size(text, args.files_per_dir)
        for mode in args.modes.split(","):
            print(f"{mode}: {n:,} files, {per_dir} per directory ...", file=sys.stderr, flush=True)
            scale.append(await bench_size(args, base, n, per_dir, mode))
    out["scale"] = scale
    counts = [int(n) for n in args.mount_counts.split(",") if n]
    if counts:
        print("timing bwrap with more mounts ...", file=sys.stderr, flush=True)
        out["mounts"] = bench_mounts(base, counts, args.mount_runs)
    out["machine"]["loadavg_end"] = load()
    return out


async def bench_size(args: argparse.Namespace, base: Path, n: int, per_dir: int, mode: str) -> dict:
    """The argv build and a sandboxed `true` in a workspace of `n` files, its `.env*` files
    found by `mode`: watched (inotify) or scanned (a `stat` per directory)."""
    with tempfile.TemporaryDirectory(prefix="talos-scan-", dir=base) as tmp:
        info = make_workspace(Path(tmp) / "ws", n, per_dir, commit=False)
        s = Sandbox(Path(tmp) / "ws")
        s._secrets._watching = mode == "watched"
        info["per_dir"], info["mode"] = per_dir, mode
        info["scannable_dirs"] = scannable_dirs(s.root)
        info["scanned_dirs"] = min(info["scannable_dirs"], MAX_SCANNED_DIRS)
        started = time.perf_counter_ns()
        info["env_found"] = len(s._env_files())  # the first scan reads every directory
        info["first scan"] = (time.perf_counter_ns() - started) / 1e6
        runs = max(5, args.argv_runs // 10)
        info["argv build"] = time_sync(
            lambda s=s: s.argv("true", writable=False, network=False), runs, warmup=2
        )
        info[".env* scan"] = time_sync(s._env_files, runs, warmup=2)
        cmds = {
            "unsandboxed": run_call(s, "true", sandboxed=False, writable=False, network=False),
            "read-only": run_call(s, "true", sandboxed=True, writable=False, network=False),
        }
        info["run"] = await time_interleaved(cmds, args.scan_runs, 3)
        info["mode"] = s._secrets.mode  # what it fell back to, if it did
        s.close()
        return info


def report(out: dict) -> None:
    m, ws, t, py, lay = out["machine"], out["workspace"], out["true"], out["python"], out["layout"]
    print(
        f"\n{m['date']}; {m['nproc']} CPUs ({m['cpu']}), {m['memory_gib']} GiB, Linux "
        f"{m['kernel']}, Python {m['python']}, {m['bwrap']}; load average "
        f"{m['loadavg_start']} at the start, {m['loadavg_end']} at the end"
    )
    src = out["sandbox_py"]
    print(
        f"sandbox.py: {src['path']}, {src.get('commit', 'not a git checkout')}, sha256 "
        f"{src['sha256']}"
    )
    print(
        f"workspace: git repo (one commit), {ws['files']:,} files in {ws['dirs']:,} "
        f"directories ({ws['scannable_dirs']:,} scanned), {ws['env_found']} of "
        f"{ws['env_planted']} .env* files found, .git/hooks, .talos/; argv of "
        f"{ws['argv_len']} words"
    )
    base = t["unsandboxed"]
    n, n_py = t["unsandboxed"]["n"], py["unsandboxed"]["n"]
    print(f"\nmedian / p95 in ms; {n} calls per row ({n_py} for python3), interleaved\n")
    print("| what is timed | median / p95 (ms) | over unsandboxed, median / p95 (ms) |")
    print("|---|---:|---:|")
    rows = [
        ("(a) `bash -c true`, `run(sandboxed=False)`", t["unsandboxed"], None),
        ("(b) `bash -c true`, sandboxed read-only", t["read-only"], base),
        ("(c) `bash -c true`, sandboxed writable", t["writable"], base),
        ("(d) `bash -c true`, sandboxed read-only with network", t["network"], base),
        ("bwrap alone: (b) with the argv prebuilt", t["bwrap alone"], base),
        ("`bash -c 'python3 -c pass'`, unsandboxed", py["unsandboxed"], None),
        ("`bash -c 'python3 -c pass'`, sandboxed read-only", py["read-only"], py["unsandboxed"]),
    ]
    for label, r, ref in rows:
        over = ""
        if ref is not None:
            dm, dp = r["median_ms"] - ref["median_ms"], r["p95_ms"] - ref["p95_ms"]
            over = f"{dm:+.1f} / {dp:+.1f}"
        print(f"| {label} | {fmt(r)} | {over} |")
    print(f"\n(e) the argv build alone, {lay['argv build']['n']} calls; median / p95 in ms\n")
    print("| part | median / p95 (ms) |")
    print("|---|---:|")
    for name, label in (
        ("argv build", "`Sandbox.argv` (all of the layout)"),
        ("argv build, writable", "`Sandbox.argv`, writable"),
        (".env* scan", "of which the `.env*` scan"),
        ("toolchains", "of which the toolchains on PATH (remembered)"),
        ("hidden paths", "of which the hidden paths (listing only)"),
        ("/etc walk", "the /etc walk, every 30 s (not in the line above)"),
        ("cgroup", f"a {out['cgroup']} made and removed (in `run`)"),
    ):
        if name in lay:
            print(f"| {label} | {fmt(lay[name], 2)} |")

    print(f"\nagainst the target: under {TARGET_MS:.0f} ms over an unsandboxed spawn\n")
    print("| variant | overhead, median | overhead, p95 | met |")
    print("|---|---:|---:|---|")
    for name, r, ref in (
        ("read-only", t["read-only"], base),
        ("writable", t["writable"], base),
        ("with network", t["network"], base),
        ("python3, read-only", py["read-only"], py["unsandboxed"]),
    ):
        dm, dp = r["median_ms"] - ref["median_ms"], r["p95_ms"] - ref["p95_ms"]
        met = (
            "yes"
            if dm < TARGET_MS and dp < TARGET_MS
            else ("median only" if dm < TARGET_MS else "no")
        )
        print(f"| {name} | {dm:.1f} ms | {dp:.1f} ms | {met} |")

    print(
        f"\nthe argv build as the workspace grows (MAX_SCANNED_DIRS = {MAX_SCANNED_DIRS:,});"
        " median / p95 in ms\n"
    )
    print(
        "| files | per dir | dirs to scan | dirs scanned | .env* found by | .env* hidden | "
        "first scan | argv build | .env* scan | run unsandboxed | run sandboxed | "
        "overhead (median) |"
    )
    print("|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for s in out["scale"]:
        r = s["run"]
        over = r["read-only"]["median_ms"] - r["unsandboxed"]["median_ms"]
        print(
            f"| {s['files']:,} | {s['per_dir']} | {s['scannable_dirs']:,} | "
            f"{s['scanned_dirs']:,} | {s['mode']} | {s['env_found']} of {s['env_planted']} | "
            f"{s['first scan']:.1f} | {fmt(s['argv build'])} | {fmt(s['.env* scan'])} | "
            f"{fmt(r['unsandboxed'])} | {fmt(r['read-only'])} | {over:.1f} |"
        )


def report_mounts(out: dict) -> None:
    if not out.get("mounts"):
        return
    print("\nbwrap alone with more mounts (half pins, half covers); median / p95 in ms\n")
    print("| extra mounts | bwrap `true` | over none (median) |")
    print("|---:|---:|---:|")
    none = out["mounts"][0]["median_ms"]
    for m in out["mounts"]:
        print(f"| {m['mounts']:,} | {fmt(m)} | {m['median_ms'] - none:+.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000, help="files in the main workspace")
    parser.add_argument("--files-per-dir", type=int, default=8)
    parser.add_argument("--runs", type=int, default=300, help="calls per `bash -c true` row")
    parser.add_argument("--heavy-runs", type=int, default=60, help="calls per python3 row")
    parser.add_argument("--argv-runs", type=int, default=500, help="calls per argv-build row")
    parser.add_argument("--scan-runs", type=int, default=40, help="runs per size in the scan")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument(
        "--scan-sizes",
        default="2000,20000,100000,100000:2",
        help="workspaces for the scan table: N or N:files-per-dir",
    )
    parser.add_argument(
        "--modes", default="watched,scanned", help="how .env* files are found in the scan table"
    )
    parser.add_argument(
        "--mount-counts",
        default="0,20,100,400",
        help='extra mounts in the bwrap-per-mount table (none: "")',
    )
    parser.add_argument("--mount-runs", type=int, default=10, help="runs per mount count")
    parser.add_argument("--where", help="parent directory of the temporary workspaces")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = parser.parse_args()

    state = Sandbox(Path.cwd()).probe()
    if not state.available:
        print(f"skipped: {state.detail}", file=sys.stderr)
        return
    with tempfile.TemporaryDirectory(prefix="talos-sandbox-bench-", dir=args.where) as tmp:
        # Talos's state (the paths covered in each workspace) in the bench's own directory
        os.environ["XDG_STATE_HOME"] = str(Path(tmp) / "state")
        out = asyncio.run(bench_main(args, Path(tmp)))
    report(out)
    report_mounts(out)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2, default=str))


if __name__ == "__main__":
    main()
