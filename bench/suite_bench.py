"""How long the test suite takes, and whether it stays green, on this machine, idle or busy.

Runs the suite as a contributor would, several ways, one after another, and prints a
Markdown table (bench/README.md, "The test suite"): wall clock, the CPU time of everything it
started, and pytest's summary line. The anchor is the suite run serially (`-n 0`) on the same
machine in the same invocation, so a parallel figure is read against it, not against another
day's machine.

    python bench/suite_bench.py                             # parallel, then the serial anchor
    python bench/suite_bench.py --ways parallel --runs 3 --load 4 --require-all
    python bench/suite_bench.py --ways fresh-clone --runs 3 --load 4

`--load N` keeps N busy loops (`while :; do :; done`) running beside every run, the busy
laptop of issue 26; `--require-all` sets TALOS_TEST_REQUIRE_ALL=1 (a missing system binary
fails its tests instead of skipping them). `fresh-clone` is `.ci/fresh-clone`: the README's two
commands in a fresh clone with only Python (no redis-server, bwrap, nvim...), pip included.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTEST = [str(ROOT / ".venv" / "bin" / "pytest"), "-p", "no:cacheprovider", "-q"]
WAYS = {
    "parallel": [*PYTEST],
    "serial": [*PYTEST, "-n", "0"],
    "full": [*PYTEST, "--full"],
    "fresh-clone": [str(ROOT / ".ci" / "fresh-clone")],
}
SUMMARY = re.compile(r"^=*\s*(\d+ (passed|failed|error).*?)\s*=*$", re.M)


def machine() -> str:
    cpu = "?"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem = Path("/proc/meminfo").read_text().split("\n", 1)[0].split()[1]
    return (
        f"{os.cpu_count()} cores ({cpu}), {int(mem) // 1024} MiB RAM, Linux "
        f"{platform.release()}, Python {platform.python_version()}"
    )


def one(way: str, load: int, require_all: bool) -> dict:
    """One run of `way` with `load` busy loops beside it."""
    busy = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(load)]
    env = dict(os.environ)
    if require_all:
        env["TALOS_TEST_REQUIRE_ALL"] = "1"
    try:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        loadavg = os.getloadavg()[0]
        t0 = time.monotonic()
        done = subprocess.run(WAYS[way], cwd=ROOT, env=env, capture_output=True, text=True)
        wall = time.monotonic() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    finally:
        for p in busy:
            p.kill()
            p.wait()
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    found = SUMMARY.findall(done.stdout + done.stderr)
    summary = found[-1][0] if found else (done.stdout + done.stderr)[-300:].strip()
    if done.returncode:  # the whole output, so a failure's assertion is never lost
        log = Path(tempfile.mkstemp(prefix=f"suite-{way}-", suffix=".log")[1])
        log.write_text(done.stdout + done.stderr)
        sys.stderr.write(f"{way}: failed; its whole output is in {log}\n")
    return {
        "way": way,
        "load": load,
        "rc": done.returncode,
        "wall_s": wall,
        "cpu_s": cpu,
        "loadavg": loadavg,
        "summary": summary,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--ways", default="parallel,serial", help=f"comma-separated, in order: {', '.join(WAYS)}"
    )
    ap.add_argument("--runs", type=int, default=1, help="runs of each way")
    ap.add_argument("--load", type=int, default=0, help="busy loops beside each run")
    ap.add_argument("--require-all", action="store_true", help="TALOS_TEST_REQUIRE_ALL=1")
    args = ap.parse_args()
    ways = args.ways.split(",")
    unknown = [w for w in ways if w not in WAYS]
    if unknown:
        ap.error(f"unknown way {unknown[0]!r}: choose from {', '.join(WAYS)}")
    print(
        f"{machine()}; {datetime.datetime.now().isoformat(timespec='minutes')}; "
        f"busy loops beside each run: {args.load}"
    )
    print("\n| way | run | wall | CPU (user+sys) | load avg at start | rc | pytest says |")
    print("|---|---|---|---|---|---|---|")
    failed = 0
    for way in ways:
        for run in range(1, args.runs + 1):
            r = one(way, args.load, args.require_all)
            failed += r["rc"] != 0
            m, s = divmod(round(r["wall_s"]), 60)
            print(
                f"| {way} | {run} | {m}m{s:02d}s | {r['cpu_s']:.0f} s | {r['loadavg']:.1f} | "
                f"{r['rc']} | {r['summary']} |",
                flush=True,
            )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
