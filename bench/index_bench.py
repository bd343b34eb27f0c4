"""Cost of the workspace index (`WorkspaceIndex`) as the workspace grows.

For each size N, a workspace of N files is generated in a temporary directory: a tree ten
files to a directory, eight directories wide; 70% `.py` files with four top-level definitions
each (three of their own, one `main` shared by all), the rest `.ts`, `.md`, `.json` and
`.txt`; a stem in twenty is one of a few common ones (`util`, `config`, `models`, `views`),
and a root `.gitignore` that ignores a `generated/` directory and `*.log` files present in
the tree. Each size is measured in a fresh process, so memory is the index's alone:

- the first scan (every source file parsed) and a second one (the walk, nothing parsed);
- the resident memory the index adds (RSS before and after the first scan, after a GC);
- `apply` of one modified file (re-parsed), one added and one deleted, and a directory of
  100 files added (the watcher's batches);
- lookups: `match_noun` (a stem shared by many files, a unique stem, a substring for a
  "config" hint, a miss that falls through to symbols), `match_symbol`, and `resolve` on a
  short request; each call timed on its own, median and p95 in microseconds.

    python bench/index_bench.py                       # N = 10,000 and 100,000
    python bench/index_bench.py --sizes 2000 --json out.json
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from timing import timed  # bench/timing.py, beside this script

from talos_ls.memory.index import WorkspaceIndex
from talos_ls.memory.resolve import resolve

PER_DIR = 10
FANOUT = 8
COMMON_STEMS = ("util", "config", "models", "views")
OTHER_SUFFIXES = (".ts", ".md", ".json", ".txt")
CALLS = 1_000
APPLY_CALLS = 50


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


# ------------------------------------------------------------------------------ measures
def rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def measure(root: Path, n: int) -> dict:
    """In this process: build, then time applies and lookups."""
    gc.collect()
    rss0 = rss_bytes()
    index = WorkspaceIndex(root)
    t0 = time.perf_counter()
    index.scan()
    first_scan = time.perf_counter() - t0
    gc.collect()
    rss1 = rss_bytes()
    t0 = time.perf_counter()
    index.refresh()
    second_scan = time.perf_counter() - t0
    files = index.files
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

    results: dict = {
        "n": n,
        "first_scan_s": first_scan,
        "second_scan_s": second_scan,
        "rss_growth_mib": (rss1 - rss0) / 2**20,
    }
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


# ------------------------------------------------------------------------------ driver
def child(n: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="index-bench-") as tmp:
        root = Path(tmp) / "ws"
        t0 = time.perf_counter()
        make_workspace(root, n)
        made = time.perf_counter() - t0
        subprocess.run(["sync"], check=False)
        result = measure(root, n)
        result["generate_s"] = made
        return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--json", help="write the raw results here")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child)))
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    results = []
    for n in sizes:  # a fresh process each: the memory figure is the index's alone
        out = subprocess.run(
            [sys.executable, __file__, "--child", str(n)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        results.append(json.loads(out))
        print(f"N = {n:,}: done", file=sys.stderr)
    print(f"Python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs\n")
    header = "| | " + " | ".join(f"N = {r['n']:,}" for r in results) + " |"
    print(header)
    print("|---|" + "---:|" * len(results))
    rows = [
        ("first scan (s), every source file parsed", "first_scan_s", "{:.2f}"),
        ("second scan (s), nothing changed", "second_scan_s", "{:.2f}"),
        ("RSS added by the index (MiB)", "rss_growth_mib", "{:.0f}"),
    ]
    for label, key, fmt in rows:
        print(f"| {label} | " + " | ".join(fmt.format(r[key]) for r in results) + " |")
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
