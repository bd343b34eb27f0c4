"""A state change -> every window's diagnostics: how soon a proposal made, applied or rejected
reaches the editors.

Two real `talos-ls` processes serve one folder on one store (two windows), each with the
document open. The change is made by a third party, this script, through the store as `talos
apply` / another server would (`ProposalBook` on the same store): a proposal is created, then
rejected, each at a random moment. Timed from the store write returning to the
`publishDiagnostics` that shows it in each window (the servers poll the store's proposal stamp
every `host.SYNC_S`).

The anchor, in the same run: the same change made by one window's own server
(`talos.proposal.reject` sent to it) -> that window's diagnostics, which needs no polling.

    .venv/bin/python bench/sync_bench.py                   # SQLite, 40 changes
    .venv/bin/python bench/sync_bench.py --redis-url redis://127.0.0.1:6390/15 --changes 40
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import platform
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from lsp_bench import Session  # bench/lsp_bench.py, beside this script

from talos_ls.edits.proposals import ProposalBook
from talos_ls.host import SYNC_S
from talos_ls.store import open_store

BASE = "def main():\n    return 1\n"
NEW = "def main():\n    return 2\n"


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


async def run(store_url: str, changes: int, root: Path) -> dict[str, list[float]]:
    ws = root / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "app.py").write_text(BASE)
    options = {"storeUrl": store_url, "model": "fake-model", "baseUrl": "http://127.0.0.1:9/v1"}
    windows = [Session(f"window {n}", root / f"home{n}") for n in (1, 2)]
    argv = [sys.executable, "-m", "talos_ls.server"]
    for window in windows:
        await window.start(argv, [ws], options)
    uri = ""
    for window in windows:
        await window.until(lambda w=window: any(s.get("folders") for _, s in w.statuses), "status")
        uri = window.open_document(ws / "src" / "app.py")
    store = open_store(store_url)
    book = ProposalBook(store, str(ws.resolve()))
    out: dict[str, list[float]] = {"made, other server": [], "rejected, other server": []}
    out["rejected, own server (anchor)"] = []

    def shown(window: Session, since: int, count: int) -> float | None:
        return next((t for t, u, n in window.diagnostics[since:] if u == uri and n == count), None)

    async def wait_all(since: list[int], count: int, t0: float, key: str) -> None:
        for window, mark in zip(windows, since, strict=True):
            t = await window.until(lambda w=window, m=mark: shown(w, m, count), key, 60)
            out[key].append(t - t0)

    try:
        for i in range(changes):
            # A person acts at any moment: not just after a poll, which waiting for the last
            # change to show would otherwise lock every change to.
            await asyncio.sleep(random.uniform(0, SYNC_S))
            since = [len(w.diagnostics) for w in windows]
            t0 = time.perf_counter()
            proposal = await asyncio.to_thread(book.create, "src/app.py", BASE, NEW)
            await wait_all(since, 1, t0, "made, other server")
            since = [len(w.diagnostics) for w in windows]
            if i % 2:  # the anchor: window 1's own server rejects it
                t0 = time.perf_counter()
                await windows[0].command("talos.proposal.reject", {"proposal_id": proposal.id})
                t = await windows[0].until(lambda m=since[0]: shown(windows[0], m, 0), "own", 60)
                out["rejected, own server (anchor)"].append(t - t0)
                await windows[1].until(lambda m=since[1]: shown(windows[1], m, 0), "other", 60)
            else:
                await asyncio.sleep(random.uniform(0, SYNC_S))
                t0 = time.perf_counter()
                await asyncio.to_thread(book.reject, proposal.id)
                await wait_all(since, 0, t0, "rejected, other server")
    finally:
        store.close()
        for window in windows:
            await window.client.shutdown_session()
            await window.client.stop()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--changes", type=int, default=40)
    parser.add_argument("--redis-url", help="measure on this Redis instead of a SQLite file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = args.redis_url or "sqlite:///" + str(Path(tmp) / "talos.db")
        started = datetime.datetime.now(datetime.UTC)
        results = asyncio.run(run(url, args.changes, Path(tmp)))
    print(
        f"{started:%Y-%m-%d %H:%M} UTC, {platform.machine()}, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.1f}, Python {platform.python_version()}, "
        f"{'Redis' if args.redis_url else 'SQLite'}, poll every {SYNC_S} s"
    )
    print(f"{'change -> diagnostics':34} {'n':>4} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    for key, samples in results.items():
        ms = [s * 1000 for s in samples]
        print(
            f"{key:34} {len(ms):>4} {percentile(ms, 0.5):>8.1f} {percentile(ms, 0.99):>8.1f} "
            f"{max(ms):>8.1f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
