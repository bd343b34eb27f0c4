"""Parity probe: seeded random sessions replayed on SQLite and on Redis (one server, and a
three-master Cluster) give identical results, operation by operation, and identical stored
state at the end."""

from __future__ import annotations

import dataclasses
import random

import pytest

from talos_ls.gates import question_queue
from talos_ls.gates.question_queue import QuestionQueue
from talos_ls.memory import facts as facts_module
from talos_ls.memory.facts import FactStore
from talos_ls.store import open_store

AGENTS = ("a1", "a2", "a3")
TEXTS = [
    "Tabs or spaces?",
    "Which parser is meant?",
    "Deploy on Fridays?",
    "Which test runner?",
    "Is the config file still config.toml?",
    "Morning or afternoon?",
    "部署会议改到周五吗？",
    "Use the staging cluster?",
]
WORDS = ["deploy", "parser", "tabs", "test", "config", "morning", "会议", "lunch", "staging"]
REPLIES = ["yes", "no", "1", "2", "3", "skip", "I don’t know", "garbage", "", "morning"]


def seeded_ids(monkeypatch, seed):
    rng = random.Random(seed)
    monkeypatch.setattr(question_queue, "_new_candidate_id", lambda: f"{rng.getrandbits(64):016x}")
    monkeypatch.setattr(facts_module, "_new_key", lambda: f"fact:{rng.getrandbits(64):016x}")


def plain(value):
    if dataclasses.is_dataclass(value):
        return dataclasses.asdict(value)
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def run_session(url: str, seed: int, steps: int) -> list:
    rng = random.Random(seed)
    store = open_store(url)
    facts = FactStore(store)
    qq = QuestionQueue(store, expiry_turns=12, cooldown_turns=4, retention_turns=25)

    def flaky(cand, turn):  # a deterministic staleness check, by id and turn
        return int(cand.candidate_id[:4], 16) % 5 == 0 and turn % 3 == 0

    qq.register_staleness_check("disjunction", flaky)
    keys = {a: [facts.add(a, f"{a} fact {i}", valid_from=0.0) for i in range(5)] for a in AGENTS}
    turns = dict.fromkeys(AGENTS, 0)
    log: list = []
    for _ in range(steps):
        agent = rng.choice(AGENTS)
        turns[agent] += rng.choice([0, 1, 1, 2]) if rng.random() > 0.05 else -3  # regressions too
        turn = turns[agent]
        op = rng.choices(
            ["propose", "note_use", "next", "answer", "expire", "prune"], [5, 3, 4, 3, 1, 1]
        )[0]
        if op == "propose":
            kind = rng.choice(question_queue.KINDS)
            signal = {
                "disjunction": "disjunction",
                "confirmation": "gate_refusal",
                "referent": "evidence_gap",
            }[kind]
            a, b = rng.sample(keys[agent], 2)
            options = {
                "disjunction": [
                    {"label": "first", "acted": [a], "contradicted": [b]},
                    {"label": "second", "acted": [b], "contradicted": [a]},
                ],
                "confirmation": [
                    {"label": "yes", "acted": [a]},
                    {"label": "no", "contradicted": [a]},
                ],
                "referent": [{"label": "morning"}, {"label": "staging"}],
            }[kind]
            targets = (
                [a, b] if kind == "disjunction" else [rng.choice([a, f"ref#{rng.randint(0, 4)}"])]
            )
            result = qq.propose(
                agent, rng.choice(TEXTS), kind, "probe", targets, signal, turn, options=options
            )
        elif op == "note_use":
            result = qq.note_use(agent, rng.sample(keys[agent] + ["ref#1", "ref#2"], 2), turn)
        elif op == "next":
            cues = None if rng.random() < 0.4 else " ".join(rng.sample(WORDS, 2))
            result = qq.next_question(agent, turn, query_cues=cues)
        elif op == "answer":
            cands = qq.candidates(agent)
            result = (
                qq.record_answer(rng.choice(cands), rng.choice(REPLIES), turn) if cands else None
            )
        elif op == "expire":
            result = qq.expire_stale(agent, turn)
        else:
            result = qq.prune(agent, turn)
        log.append((op, agent, turn, plain(result)))
    for agent in AGENTS:
        log.append(("state", agent, plain(qq.candidates(agent)), plain(facts.list(agent))))
    log.append(("agents", store.qq_agents()))
    store.close()
    return log


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("redis_kind", ["redis_server", "redis_cluster"])
def test_sqlite_and_redis_agree_operation_by_operation(
    seed, redis_kind, tmp_path, request, monkeypatch
):
    steps = 1200
    seeded_ids(monkeypatch, seed)
    on_sqlite = run_session("sqlite:///" + str(tmp_path / "p.db"), seed, steps)
    redis_server = request.getfixturevalue(redis_kind)
    redis_server.flush()
    seeded_ids(monkeypatch, seed)
    on_redis = run_session(redis_server.url, seed, steps)
    assert len(on_sqlite) == len(on_redis)
    for i, (s, r) in enumerate(zip(on_sqlite, on_redis, strict=True)):
        assert s == r, f"operation {i} differs: {s[:3]}"
    # The probe must exercise the interesting paths, or agreement proves little.
    ops = [entry for entry in on_sqlite if entry[0] in ("next", "answer", "expire", "prune")]
    assert sum(1 for e in ops if e[0] == "next" and e[3]) >= 5
    assert sum(1 for e in ops if e[0] == "answer" and e[3] and e[3]["applied"]) >= 3
    assert sum(1 for e in ops if e[0] == "prune" and e[3]) >= 1
