"""`talos memory add/forget/conflicts` run as the real console script on a real SQLite file:
forgetting a fact ends the conflicts it was a side of (and the question built from one), and
saying the same thing twice is held once, with no evidence added."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from talos_ls.gates.question_queue import QuestionQueue
from talos_ls.store import open_store

TALOS = str(Path(sys.executable).with_name("talos"))


@pytest.fixture
def talos(tmp_path):
    """`talos --store sqlite:///<tmp>/talos.db ARGS...`, with no store from the environment."""
    url = "sqlite:///" + str(tmp_path / "talos.db")
    env = {k: v for k, v in os.environ.items() if k != "TALOS_STORE_URL"}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [TALOS, "--store", url, *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=60,
        )
        assert "Traceback" not in proc.stderr, proc.stderr
        return proc

    run.url = url  # type: ignore[attr-defined]
    return run


def facts_of(talos, agent="w"):
    proc = talos("memory", "--json", "--agent", agent)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def conflicts_of(talos, agent="w"):
    proc = talos("memory", "conflicts", "--json", "--agent", agent)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def add(talos, statement, *extra):
    proc = talos("memory", "add", statement, "--agent", "w", *extra)
    assert proc.returncode == 0, proc.stderr
    return proc


def test_forget_ends_the_conflict_and_its_question(talos):
    add(talos, "Tests use unittest", "--source", "rules file")
    add(talos, "Tests use pytest", "--source", "rules file")
    (conflict,) = conflicts_of(talos)
    unittest = next(s for s in conflict["sides"] if s["value"] == "unittest")
    # The host turns the conflict into a question before anyone forgets anything.
    store = open_store(talos.url)
    try:
        qq = QuestionQueue(store)
        assert qq.propose_from_disjunctions("w", 1) == 1
    finally:
        store.close()

    forgot = talos("memory", "forget", unittest["key"][:13])
    assert forgot.returncode == 0 and forgot.stdout.startswith("retracted " + unittest["key"])
    assert conflicts_of(talos) == []
    listed = talos("memory", "--agent", "w", "conflicts")
    assert listed.stdout.strip() == "No unresolved conflicts."
    live = [f["value"] for f in facts_of(talos) if f["invalid_at"] is None]
    assert live == ["pytest"]

    store = open_store(talos.url)
    try:
        qq = QuestionQueue(store)
        assert qq.next_question("w", 2, "run the tests") is None  # never asked now
        (cand,) = qq.candidates("w")
        assert (cand.status, cand.ask_count, cand.delivered_turn) == ("expired", 0, None)
        assert qq.propose_from_disjunctions("w", 3) == 0  # and not proposed again
    finally:
        store.close()


def test_forgetting_a_fact_twice_says_it_was_already_closed(talos):
    add(talos, "Tests use unittest", "--source", "rules file")
    add(talos, "Tests use pytest", "--source", "rules file")
    key = facts_of(talos)[0]["key"]
    assert talos("memory", "forget", key).returncode == 0
    again = talos("memory", "forget", key)
    assert again.returncode == 0 and "was already closed (retracted)" in again.stdout
    assert conflicts_of(talos) == []


@pytest.mark.parametrize(
    "first, second",
    [
        (("Tests use pytest",), ("Tests use pytest",)),
        (("Tests use pytest",), ("  tests USE pytest. ",)),  # the same words, told again
        (("Dana prefers mornings",), ("Dana prefers mornings",)),  # no slot
        (
            ("Tests use pytest", "--source", "rules file"),
            ("Tests use pytest", "--source", "rules file"),
        ),
    ],
)
def test_the_same_statement_twice_is_held_once_without_evidence(talos, first, second):
    stored = add(talos, *first)
    (fact,) = facts_of(talos)
    assert fact["key"] in stored.stdout
    again = add(talos, *second)
    assert fact["key"] in again.stdout  # the fact already held, not a new one
    assert again.stdout.startswith("already held ") and "not new evidence" in again.stdout
    assert facts_of(talos) == [fact]  # one row, bit-identical: no evidence, no history row
    for _ in range(3):
        add(talos, *second)
    assert facts_of(talos) == [fact]


def test_a_repeat_from_another_source_corroborates(talos):
    add(talos, "Tests use pytest", "--source", "rules file")
    add(talos, "Tests use pytest")  # the person says it too: independent evidence
    facts = facts_of(talos)
    live = [f for f in facts if f["invalid_at"] is None]
    assert [(f["source"], f["evidence_count"], f["corroborations"]) for f in live] == [
        ("person", 1, 1)
    ]
    assert live[0]["confidence"] == pytest.approx(0.7)
    # Said again by the person: already held, nothing moves.
    add(talos, "Tests use pytest")
    assert facts_of(talos) == facts


def test_a_forgotten_statement_said_again_is_held_anew(talos):
    add(talos, "Tests use pytest")
    (old,) = facts_of(talos)
    assert talos("memory", "forget", old["key"]).returncode == 0
    add(talos, "Tests use pytest")
    facts = facts_of(talos)
    assert len(facts) == 2 and facts[0]["invalid_at"] is not None
    assert facts[1]["invalid_at"] is None and facts[1]["key"] != old["key"]
    assert facts[1]["evidence_count"] == 0
