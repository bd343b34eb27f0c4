"""Per-call cost of the question queue as one agent's history grows.

For each N, one agent holds N candidates: 2% open and recently used (pending, proposed in the
last few turns, sharing the cue "deploy"), the rest history within retention (half answered,
half expired). Each operation is timed call by call; the table gives the median and p95 in
microseconds. Seeding goes through the public API, so any backend can be measured.

    python bench/queue_bench.py                        # SQLite, N = 100 .. 100,000
    python bench/queue_bench.py --sizes 1000 --calls 50
    python bench/queue_bench.py --backend redis --redis-url redis://127.0.0.1:6390/15
    python bench/queue_bench.py --backend redis --redis-url 'redis+sentinel://127.0.0.1:26379/talos?wait=1'
    python bench/queue_bench.py --backend redis-cluster --redis-url redis+cluster://127.0.0.1:7000
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from timing import timed  # bench/timing.py, beside this script

from talos_ls.gates.question_queue import QuestionQueue
from talos_ls.store import open_store, redact_url

AGENT = "bench"
T = 10_000  # the current turn; history sits in [T - 400, T - 30]
OPEN_SHARE = 0.02


def reset_budget(store, backend: str) -> None:
    """Untimed: forget the agent's last delivery, so the next call may deliver again."""
    if backend == "sqlite":
        store._conn.execute("DELETE FROM question_budget")
    else:
        store._client.delete("talos:{" + AGENT + "}:bucket")


def seed(qq: QuestionQueue, n: int) -> list[str]:
    n_open = max(1, round(n * OPEN_SHARE))
    n_hist = n - n_open
    for i in range(n_hist):
        turn = T - 400 + (i * 370) // max(n_hist, 1)
        cand = qq.propose(
            AGENT,
            f"Old question {i} about module{i}?",
            "referent",
            "seed",
            [f"old:{i}"],
            "evidence_gap",
            turn,
            options=[{"label": "yes"}, {"label": "no"}],
        )
        if i % 2 == 0:
            qq.record_answer(cand, "yes", turn + 1)
    # The unanswered half expires, all of it: created by T - 30, so past expiry after T - 10
    # (at T - 25, those created after T - 45 stayed pending: open questions not reported).
    qq.expire_stale(AGENT, T)
    open_ids = []
    for i in range(n_open):
        cand = qq.propose(
            AGENT,
            f"Deploy question {i}: which target{i}?",
            "referent",
            "seed",
            [f"open:{i}"],
            "evidence_gap",
            T - 3 + i % 4,
            options=[{"label": "staging"}, {"label": "prod"}],
        )
        open_ids.append(cand.candidate_id)
    return open_ids


def check_open(qq: QuestionQueue, open_ids: list[str]) -> None:
    """Untimed: the open candidates are exactly the ones the table reports, all pending, so a
    phase that leaves one delivered (or history left pending) stops the run instead of
    silently measuring a different queue."""
    held = {c.candidate_id: c.status for c in qq.candidates(AGENT)}
    open_held = sorted(i for i, status in held.items() if status not in ("answered", "expired"))
    pending = sorted(i for i in open_ids if held.get(i) == "pending")
    if open_held != sorted(open_ids) or pending != open_held:
        sys.exit(
            f"queue_bench: {len(open_ids)} open questions reported, {len(open_held)} open, "
            f"{len(pending)} of them pending"
        )


def bench_size(
    backend: str, n: int, calls: int, workdir: Path, redis_url: str, ranking: str = "value"
) -> dict:
    url = "sqlite:///" + str(workdir / f"bench-{n}.db") if backend == "sqlite" else redis_url
    store = open_store(url)
    if backend != "sqlite":
        store._client.flushdb()  # a cluster: on every primary
    qq = QuestionQueue(store, ranking=ranking)
    facts = qq.facts
    t0 = time.perf_counter()
    open_ids = seed(qq, n)
    seeded_s = time.perf_counter() - t0
    check_open(qq, open_ids)
    results: dict[str, dict] = {}
    delivered: list[str] = []

    def undo_last(i: int) -> None:
        """Untimed: put the last delivery back (pending again) and reopen the budget."""
        if delivered:
            store.qq_claim(
                AGENT, delivered.pop(), ["delivered"], {"status": "pending", "delivered_turn": None}
            )
        reset_budget(store, backend)

    def deliver(i: int) -> None:
        got = qq.next_question(AGENT, T, "deploy the app")
        assert got is not None
        delivered.append(got.candidate_id)

    # One delivery closes the budget, and is put back after: left delivered, it was N = 10's
    # only open question (the deliverable row then crashed) and one question fewer than
    # reported for every larger N.
    deliver(0)
    results["next_question (budget closed)"] = timed(
        lambda i: qq.next_question(AGENT, T + 1, "deploy"), calls
    )
    undo_last(0)
    results["next_question (nothing eligible)"] = timed(
        lambda i: qq.next_question(AGENT, T, "what is for lunch"), calls
    )
    results["next_question (deliverable)"] = timed(deliver, calls, before=undo_last)
    undo_last(0)
    check_open(qq, open_ids)

    results["propose (duplicate)"] = timed(
        lambda i: qq.propose(
            AGENT,
            f"Deploy question {i % len(open_ids)}: which target{i % len(open_ids)}?",
            "referent",
            "seed",
            ["x"],
            "evidence_gap",
            T,
        ),
        calls,
    )
    results["propose (new)"] = timed(
        lambda i: qq.propose(
            AGENT, f"New question {i}?", "referent", "bench", [f"new:{i}"], "evidence_gap", T
        ),
        calls,
    )
    results["note_use (1 hit)"] = timed(
        lambda i: qq.note_use(AGENT, [f"open:{i % len(open_ids)}", "nothing"], T + 1 + i), calls
    )
    # Answers: a fresh disjunction per call, between two fresh facts.
    pool = []
    for i in range(2 * calls):
        a, b = facts.add(AGENT, f"side a {i}"), facts.add(AGENT, f"side b {i}")
        pool.append(
            qq.propose(
                AGENT,
                f"Answer me {i}?",
                "disjunction",
                "bench",
                [a, b],
                "disjunction",
                T + calls + 2,
                options=[
                    {"label": "a", "acted": [a], "contradicted": [b]},
                    {"label": "b", "acted": [b], "contradicted": [a]},
                ],
            )
        )
    t = T + calls + 3
    results["record_answer (answered)"] = timed(
        lambda i: qq.record_answer(pool[i], "a", t).applied or sys.exit("not applied"), calls
    )
    results["record_answer (deflected)"] = timed(
        lambda i: qq.record_answer(pool[calls + i], "skip", t), calls
    )
    results["_seed_seconds"] = {"value": round(seeded_s, 1)}
    store.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="sqlite", choices=["sqlite", "redis", "redis-cluster"])
    parser.add_argument(
        "--redis-url",
        default=None,
        help="with --backend redis (any redis:// or redis+sentinel:// URL, ?wait=N too) or "
        "redis-cluster (a redis+cluster:// URL): a store whose database is FLUSHED for each N",
    )
    parser.add_argument("--sizes", default="100,1000,10000,100000")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument(
        "--ranking",
        default="value",
        choices=["value", "seed"],
        help="the queue's ranking (the host's is value)",
    )
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = parser.parse_args()
    if args.redis_url is None:
        args.redis_url = {
            "redis": "redis://127.0.0.1:6379/15",
            "redis-cluster": "redis+cluster://127.0.0.1:7000",
        }.get(args.backend)
    elif args.backend == "redis-cluster" and not args.redis_url.startswith(
        ("redis+cluster", "rediss+cluster")
    ):
        parser.error("--backend redis-cluster needs a redis+cluster:// URL")
    sizes = [int(s) for s in args.sizes.split(",")]
    all_results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            print(f"N = {n:,}: seeding and timing ...", file=sys.stderr, flush=True)
            all_results[n] = bench_size(
                args.backend, n, args.calls, Path(tmp), args.redis_url, args.ranking
            )
    ops = [op for op in all_results[sizes[0]] if not op.startswith("_")]
    shown = "" if args.backend == "sqlite" else f" ({redact_url(args.redis_url)})"
    where = f"{platform.python_version()}, {platform.machine()}"
    print(
        f"\nbackend {args.backend}{shown}, ranking {args.ranking}, {args.calls} calls per "
        f"cell, {where}; median / p95 in microseconds\n"
    )
    print("| operation | " + " | ".join(f"N = {n:,}" for n in sizes) + " |")
    print("|---|" + "---:|" * len(sizes))
    for op in ops:
        cells = [
            f"{all_results[n][op]['median_us']:,.0f} / {all_results[n][op]['p95_us']:,.0f}"
            for n in sizes
        ]
        print(f"| {op} | " + " | ".join(cells) + " |")
    seeds = [str(all_results[n]["_seed_seconds"]["value"]) for n in sizes]
    print("| seeding N candidates (s) | " + " | ".join(seeds) + " |")
    if args.json:
        Path(args.json).write_text(json.dumps(all_results, indent=2))


if __name__ == "__main__":
    main()
