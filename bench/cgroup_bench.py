"""What joining a command's cgroups costs: none, `pids` alone, and `pids` with `memory` (two
hierarchies on cgroup v1, two controllers of one cgroup on v2), started as `Sandbox.run`
starts a command (`Cage.wrap`'s `sh` joins, then execs it), `true` as the command. The three
are interleaved, one call of each per round, so load on the machine hits them alike.

    python bench/cgroup_bench.py            # 150 rounds; needs root or a delegated subtree
    python bench/cgroup_bench.py --runs 500
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

from talos_ls.agent import limits


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=150, help="rounds (one call of each)")
    args = parser.parse_args()
    found = limits.hierarchies()
    if not found:
        print("no cgroup can be made here (root, or a delegated cgroup v2 subtree)")
        return 1
    shown = [f"v{h.version} {'+'.join(sorted(h.controllers))}" for h in found]
    print(f"hierarchies: {', '.join(shown)}; load average {os.getloadavg()[0]:.1f} at the start")
    pids = [h for h in found if set(h.controllers) == {"pids"}] or found
    ways = {"no cgroup": None, "pids": pids, "pids and memory": found}
    samples: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(args.runs):
        for name, chosen in ways.items():
            cage = limits.Cage(limits.Limits.default(), chosen) if chosen else None
            argv = cage.wrap(["true"]) if cage else ["/bin/sh", "-c", "exec true"]
            t0 = time.perf_counter()
            subprocess.run(argv, check=True)
            samples[name].append((time.perf_counter() - t0) * 1000)
            if cage:
                cage.close()
    print("\n| started | median / p95 (ms) |")
    print("|---|---:|")
    for name, times in samples.items():
        times.sort()
        p95 = times[min(len(times) - 1, int(len(times) * 0.95))]
        print(f"| {name} | {statistics.median(times):.1f} / {p95:.1f} |")
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
