"""Cost of the workspace index (`WorkspaceIndex`) as the workspace grows.

For each size N, a workspace of N files is generated in a temporary directory: a tree ten
files to a directory, eight directories wide; 70% `.py` files with four top-level definitions
each (three of their own, one `main` shared by all), the rest `.ts`, `.md`, `.json` and
`.txt`; a stem in twenty is one of a few common ones (`util`, `config`, `models`, `views`),
and a root `.gitignore` that ignores a `generated/` directory and `*.log` files present in
the tree. Each size is measured in a fresh process, so memory is the index's alone:

- the anchors, on the same tree in the same process: `rg --files` (wall and CPU time, the
  median of five runs around the index's) and a bare `os.scandir` walk in Python (no filter);
- the first scan, in a thread as a server runs it: until `ready` (the listing published)
  and until `complete` (every source file's symbols read), and a second one (`refresh`);
- the resident memory the index adds (RSS before and after the first scan, after a GC);
- `apply` of one modified file (re-parsed), one added and one deleted, and a directory of
  100 files added (the watcher's batches);
- lookups: `match_noun` (a stem shared by many files, a unique stem, a substring for a
  "config" hint, a miss that falls through to symbols), `match_symbol`, and `resolve` on a
  short request; each call timed on its own, median and p95 in microseconds;
- `talos run` (`--run`): process start to the first model request and to exit, on the N-file
  tree and on a 22-file one, alternating, the model a scripted local server; bytecode cached.

`--tree real` builds the tree from the files of the Python environment's site-packages
instead (hard links, copied again under c1/, c2/... until N): real sizes and real Python; it
measures the scans and the memory only.

    python bench/index_bench.py                       # N = 10,000 and 100,000
    python bench/index_bench.py --sizes 2000 --json out.json
    python bench/index_bench.py --sizes 100000 --run  # and `talos run`, 22 files against N
    python bench/index_bench.py --sizes 100000 --tree real
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from timing import timed  # bench/timing.py, beside this script

from talos_ls.demo.scripted_model import ScriptedModelServer, reply
from talos_ls.memory.index import SKIP_DIRS, WorkspaceIndex
from talos_ls.memory.resolve import resolve

PER_DIR = 10
FANOUT = 8
COMMON_STEMS = ("util", "config", "models", "views")
OTHER_SUFFIXES = (".ts", ".md", ".json", ".txt")
CALLS = 1_000
APPLY_CALLS = 50
ANCHOR_RUNS = 5
RUN_REPS = 5
RUN_REQUEST = "fix the parser and call load_config()"
TALOS = str(Path(sys.executable).with_name("talos"))


# ------------------------------------------------------------------------------ workspace
def make_workspace(root: Path, n: int) -> None:
    """N files in a tree FANOUT wide, PER_DIR to a directory (see the module docstring)."""
    n_dirs = max(1, -(-n // PER_DIR))
    dirs = [root / "src"]
    for i in range(1, n_dirs):
        dirs.append(dirs[(i - 1) // FANOUT] / f"pkg{i}")
    for d in dirs:
        d.mkdir(parents=True, exist_ok=True)
    (root / ".gitignore").write_text("generated/\n*.log\n")
    for k in range(50):  # ignored: never listed, never parsed
        (root / "generated").mkdir(exist_ok=True)
        (root / "generated" / f"gen{k}.py").write_text("def generated():\n    pass\n")
        (dirs[k % len(dirs)] / f"trace{k}.log").write_text("log\n")
    for i in range(n):
        d = dirs[i // PER_DIR]
        stem = COMMON_STEMS[i % len(COMMON_STEMS)] if i % 20 == 0 else f"mod{i}"
        if i % 1000 == 500:
            stem = f"app_settings{i}"  # found by substring only: "the settings config"
        if i % 10 < 7:
            (d / f"{stem}.py").write_text(
                f'"""Module {i}."""\n\nimport os\n\nLIMIT_{i} = {i}\n\n\n'
                f"class Thing{i}:\n    def method(self):\n        return {i}\n\n\n"
                f"def func_{i}(x):\n    return x + {i}\n\n\n"
                "def main():\n    pass\n"
            )
        else:
            suffix = OTHER_SUFFIXES[i % len(OTHER_SUFFIXES)]
            text = f"export function helper{i}() {{}}\n" if suffix == ".ts" else f"{i}\n"
            (d / f"{stem}{suffix}").write_text(text)


def make_real_workspace(root: Path, n: int) -> None:
    """N files hard-linked (copied where a link cannot be made) from site-packages, the whole
    of it under c0/, again under c1/, ... until N; the same root .gitignore as above."""
    source = Path(sysconfig.get_paths()["purelib"])
    found = []
    for here, dirs, names in os.walk(source):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for name in sorted(names):
            path = os.path.join(here, name)
            if os.path.isfile(path) and not os.path.islink(path):
                found.append(os.path.relpath(path, source))
    root.mkdir(parents=True)
    (root / ".gitignore").write_text("generated/\n*.log\n")
    made, copy = 1, 0
    while made < n + 1:
        for rel in found[: n + 1 - made]:
            target = root / f"c{copy}" / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(source / rel, target)
            except OSError:
                shutil.copyfile(source / rel, target)
        made += min(len(found), n + 1 - made)
        copy += 1


# ------------------------------------------------------------------------------ measures
def rg_files(root: Path) -> tuple[float, float]:
    """`rg --files` in `root`: (wall s, CPU s of rg)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(["rg", "--files"], cwd=root, stdout=subprocess.DEVNULL, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def bare_walk(root: Path) -> int:
    """Every regular file under `root` by os.scandir, sorted: the walk with nothing else."""
    out, stack, prefix = [], [""], str(root) + "/"
    while stack:
        here = stack.pop()
        with os.scandir(prefix + here if here else root) as it:
            for e in it:
                rel = f"{here}/{e.name}" if here else e.name
                if e.is_dir(follow_symlinks=False):
                    stack.append(rel)
                elif e.is_file(follow_symlinks=False):
                    out.append(rel)
    out.sort()
    return len(out)


def rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def measure(root: Path, n: int, real: bool) -> dict:
    """In this process: the anchors, the build, then time applies and lookups."""
    rg: list[tuple[float, float]] = []
    walk: list[float] = []
    have_rg = shutil.which("rg") is not None
    for _ in range(ANCHOR_RUNS - 2):
        rg += [rg_files(root)] if have_rg else []
        t0 = time.perf_counter()
        bare_walk(root)
        walk.append(time.perf_counter() - t0)
    gc.collect()
    rss0 = rss_bytes()
    index = WorkspaceIndex(root)
    builder = threading.Thread(target=index.scan)  # as a server builds it
    t0 = time.perf_counter()
    builder.start()
    index.ready.wait()
    ready = time.perf_counter() - t0
    builder.join()
    first_scan = time.perf_counter() - t0
    gc.collect()
    rss1 = rss_bytes()
    for _ in range(2):
        rg += [rg_files(root)] if have_rg else []
    t0 = time.perf_counter()
    index.refresh()
    second_scan = time.perf_counter() - t0
    files = index.files
    results: dict = {
        "n": n,
        "files_indexed": len(files),
        "rg_files_s": statistics.median(w for w, _ in rg) if rg else None,
        "rg_files_cpu_s": statistics.median(c for _, c in rg) if rg else None,
        "bare_walk_s": statistics.median(walk),
        "ready_s": ready,
        "first_scan_s": first_scan,
        "second_scan_s": second_scan,
        "rss_growth_mib": (rss1 - rss0) / 2**20,
        "bytes_per_file": (rss1 - rss0) / len(files),
        "symbols": sum(len(v) for v in index.symbols.values()),
    }
    if real:
        return results
    assert len(files) == n + 1, (len(files), n)  # and the .gitignore

    def apply_us(changes: list[tuple[str, str]]) -> float:
        t0 = time.perf_counter_ns()
        index.apply(changes)
        return (time.perf_counter_ns() - t0) / 1000

    target = root / "src" / "mod1.py"  # a source file with four definitions

    def modify(i: int) -> float:
        target.write_text(
            f"def func_1(x):\n    return x + {i}\n\n\ndef extra_{i % 7}():\n    pass\n"
        )
        return apply_us([("modified", str(target))])

    new = root / "src" / "brand_new.py"

    def add_or_delete(i: int) -> float:
        if i % 2 == 0:
            new.write_text("def brand_new():\n    pass\n")
            return apply_us([("added", str(new))])
        new.unlink()
        return apply_us([("deleted", str(new))])

    staging = root.parent / "staging"

    def add_directory(i: int) -> float:
        d = root / "src" / f"incoming{i}"
        (staging / "batch").mkdir(parents=True)
        for k in range(100):
            (staging / "batch" / f"in{i}_{k}.py").write_text(f"def in{i}_{k}():\n    pass\n")
        os.rename(staging / "batch", d)  # `mv`: one event for the directory
        return apply_us([("added", str(d))])

    ops: dict[str, dict] = {}
    ops["apply: 1 file modified (re-parsed)"] = timed_apply(modify, APPLY_CALLS)
    ops["apply: 1 file added / deleted"] = timed_apply(add_or_delete, APPLY_CALLS)
    ops["apply: directory of 100 files added"] = timed_apply(add_directory, 10)
    ops["match_noun: common stem (util)"] = timed(lambda i: index.match_noun("util", None), CALLS)
    ops["match_noun: unique stem"] = timed(
        lambda i: index.match_noun(f"mod{(i * 37) % n | 1}", None), CALLS
    )
    ops["match_noun: substring (config hint)"] = timed(
        lambda i: index.match_noun("settings", "config"), CALLS
    )
    ops["match_noun: no file, a symbol (class hint)"] = timed(
        lambda i: index.match_noun(f"Thing{(i * 10) % n + 1}", "class"), CALLS
    )
    ops["match_symbol: unique"] = timed(lambda i: index.match_symbol(f"func_{i % n}"), CALLS)
    ops["match_symbol: in every .py (main)"] = timed(lambda i: index.match_symbol("main"), 100)
    ops["resolve: 'fix the parser and call load_config()'"] = timed(
        lambda i: resolve("a", i, "fix the parser and call load_config()", index), CALLS
    )
    results["ops"] = ops
    results["main_defined_in"] = len(index.match_symbol("main"))
    results["util_files"] = len(index.match_noun("util", None))
    return results


def timed_apply(fn: Callable[[int], float], calls: int) -> dict:
    """`fn` prepares the change on disk, untimed, and returns the µs of the `apply` alone."""
    samples = sorted(fn(i) for i in range(calls))
    return {
        "median_us": statistics.median(samples),
        "p95_us": samples[min(len(samples) - 1, int(len(samples) * 0.95))],
        "calls": calls,
    }


def talos_run(root: Path, model: ScriptedModelServer, tmp: Path) -> tuple[float, float]:
    """`talos run` on `root` in a fresh store: (s to the first model request, s to exit)."""
    model.requests.clear()
    model.script[:] = [reply("ok")]
    home = Path(tempfile.mkdtemp(dir=tmp))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TALOS_", "OPENAI_"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # bytecode cached: start-up as people have it
    env.update(
        TALOS_STORE_URL=f"sqlite:///{home}/talos.db",
        XDG_CONFIG_HOME=str(home / "config"),
        OPENAI_API_KEY="sk-bench-not-a-key",
    )
    argv = [TALOS, "run", RUN_REQUEST, "--workspace", str(root), "--base-url", model.url]
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [*argv, "--model", "fake-model", "--json"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    while not model.requests and proc.poll() is None:
        time.sleep(0.001)
    first = time.perf_counter() - t0
    _, err = proc.communicate()
    done = time.perf_counter() - t0
    if proc.returncode != 0 or not model.requests:
        raise RuntimeError(f"talos run failed ({proc.returncode}): {err.decode()[-500:]}")
    return first, done


def measure_run(root: Path, n: int, tmp: Path, reps: int) -> dict:
    """`talos run` on the N-file tree and on a 22-file one, alternating, after a warm-up."""
    small = tmp / "ws22"
    make_workspace(small, 22)
    model = ScriptedModelServer()
    try:
        talos_run(small, model, tmp)  # warm-up: bytecode written, disk cache warm
        runs: dict[str, list[tuple[float, float]]] = {"22": [], str(n): []}
        for rep in range(reps):
            order = ((small, "22"), (root, str(n)))
            for where, label in order if rep % 2 else order[::-1]:
                runs[label].append(talos_run(where, model, tmp))
    finally:
        model.close()
    return {
        label: {
            "first_request_s": statistics.median(f for f, _ in r),
            "exit_s": statistics.median(d for _, d in r),
            "first_request_all_s": [f for f, _ in r],
        }
        for label, r in runs.items()
    }


# ------------------------------------------------------------------------------ driver
def child(n: int, tree: str, run: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="index-bench-") as tmp:
        root = Path(tmp) / "ws"
        t0 = time.perf_counter()
        (make_real_workspace if tree == "real" else make_workspace)(root, n)
        made = time.perf_counter() - t0
        subprocess.run(["sync"], check=False)
        result = measure(root, n, tree == "real")
        result["generate_s"] = made
        result["load_after"] = os.getloadavg()[0]
        if run:
            result["talos_run"] = measure_run(root, n, Path(tmp), run)
        return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--tree", choices=("synthetic", "real"), default="synthetic")
    ap.add_argument("--run", action="store_true", help="and `talos run`: 22 files against N")
    ap.add_argument("--run-reps", type=int, default=RUN_REPS, help="`talos run`s of each size")
    ap.add_argument("--json", help="write the raw results here")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.tree, args.run_reps if args.run else 0)))
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    results = []
    load_before = os.getloadavg()
    for n in sizes:  # a fresh process each: the memory figure is the index's alone
        argv = [sys.executable, __file__, "--child", str(n), "--tree", args.tree]
        out = subprocess.run(
            argv + (["--run", "--run-reps", str(args.run_reps)] if args.run else []),
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        results.append(json.loads(out))
        print(f"N = {n:,}: done", file=sys.stderr)
    print(f"Python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs")
    print(
        f"tree {args.tree}; load average before {load_before[0]:.1f}, after each size "
        + ", ".join(f"{r['load_after']:.1f}" for r in results)
        + "\n"
    )
    header = "| | " + " | ".join(f"N = {r['n']:,}" for r in results) + " |"
    print(header)
    print("|---|" + "---:|" * len(results))
    rows = [
        ("anchor: `rg --files` (s), median of 5", "rg_files_s", "{:.2f}"),
        ("anchor: `rg --files` CPU (s)", "rg_files_cpu_s", "{:.2f}"),
        ("anchor: bare os.scandir walk in Python (s)", "bare_walk_s", "{:.2f}"),
        ("first scan: `ready`, the listing published (s)", "ready_s", "{:.2f}"),
        ("ready / `rg --files`", None, None),
        ("first scan: `complete`, every source file read (s)", "first_scan_s", "{:.2f}"),
        ("second scan (s), nothing changed", "second_scan_s", "{:.2f}"),
        ("RSS added by the index (MiB)", "rss_growth_mib", "{:.1f}"),
        ("RSS added a file (bytes)", "bytes_per_file", "{:.0f}"),
        ("files indexed / symbols", None, None),
    ]
    for label, key, fmt in rows:
        if key is not None:
            cells = ["-" if r[key] is None else fmt.format(r[key]) for r in results]
        elif label.startswith("ready"):
            cells = [
                f"{r['ready_s'] / r['rg_files_s']:.2f}x" if r["rg_files_s"] else "-"
                for r in results
            ]
        else:
            cells = [f"{r['files_indexed']:,} / {r['symbols']:,}" for r in results]
        print(f"| {label} | " + " | ".join(cells) + " |")
    for r in results:
        for label, run in r.get("talos_run", {}).items():
            print(
                f"| `talos run`, {int(label):,} files: first model request / exit (s), "
                f"median of {args.run_reps} | {run['first_request_s']:.2f} / {run['exit_s']:.2f} |"
            )
        if "talos_run" in r:
            runs = r["talos_run"]
            ratio = runs[str(r["n"])]["first_request_s"] / runs["22"]["first_request_s"]
            print(f"| `talos run` first request, {r['n']:,} files / 22 files | {ratio:.2f}x |")
    if "ops" not in results[0]:
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=2))
        return
    for op in results[0]["ops"]:
        cells = [r["ops"][op] for r in results]
        print(
            f"| {op} (µs) | "
            + " | ".join(f"{c['median_us']:,.0f} / {c['p95_us']:,.0f}" for c in cells)
            + " |"
        )
    print(
        "\n(workspace generation: "
        + ", ".join(f"{r['generate_s']:.0f} s at N = {r['n']:,}" for r in results)
        + ")"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
