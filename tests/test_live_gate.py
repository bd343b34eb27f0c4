"""The live-uncertainty gate (`QuestionQueue(..., ranking="value")`), on every backend: a
candidate whose reason to ask is gone is expired with a reason instead of asked, and the budget
is not spent on it. The confidences are hand-computed with the capped-Bayesian rule (prior 0.5,
signals 0.9 / 0.1, gain 1/(n + 2)): one "acted" 0.5 -> 0.7, one "contradicted" 0.5 -> 0.3, and
then one "acted" 0.3 -> 0.3 + 0.6 / 3 = 0.5."""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace

import pytest

from talos_ls.gates.question_queue import QuestionQueue

from .conftest import confirmation, disjunction

LOGGER = "talos_ls.gates.question_queue"


@pytest.fixture
def vq(store, facts) -> QuestionQueue:
    return QuestionQueue(store, facts=facts, ranking="value")


def weak_fact(facts, text="Deploys go through the staging cluster"):
    """A fact at 0.3: below the default gate (0.5), what the gate producer asks to confirm."""
    key = facts.add("a1", text)
    facts.observe({key: "contradicted"})
    assert facts.get(key).confidence == pytest.approx(0.3)
    return key


def expired_with(caplog, cand, reason):
    """The expiry is recorded as one INFO line naming the id and the reason, and never the
    question's text."""
    lines = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert f"question_queue: {cand.candidate_id} expired: {reason}" in lines
    assert not any(cand.question_text in line for line in lines)


def test_the_option_is_checked(store):
    with pytest.raises(ValueError, match="ranking"):
        QuestionQueue(store, ranking="entropy")
    with pytest.raises(ValueError, match="gate_threshold"):
        QuestionQueue(store, ranking="value", gate_threshold=1.5)


# ----------------------------------------------------------- disjunctions
def test_a_separated_conflict_expires_and_the_next_one_is_asked(vq, facts, caplog):
    caplog.set_level(logging.INFO, logger=LOGGER)
    cand, a, b = disjunction(vq, facts, turn=0)
    weak = weak_fact(facts)
    other = confirmation(vq, weak, turn=0)
    facts.observe({a: "acted", b: "contradicted"})  # 0.7 / 0.3: reconciliation's split
    got = vq.next_question("a1", 1)
    assert got is not None and got.candidate_id == other.candidate_id  # same call, no budget
    dead = vq.get(cand.candidate_id)
    assert (dead.status, dead.resolved_turn, dead.ask_count) == ("expired", 1, 0)
    assert vq.store.qq_last_delivery("a1") == 1  # spent once, on the delivered one
    expired_with(caplog, cand, "conflict_separated")


def test_a_separated_conflict_alone_spends_no_budget(vq, facts):
    cand, a, b = disjunction(vq, facts, turn=0)
    facts.observe({a: "acted", b: "contradicted"})
    assert vq.next_question("a1", 1) is None
    assert vq.get(cand.candidate_id).status == "expired"
    assert vq.store.qq_last_delivery("a1") is None
    # The budget is open: a new candidate is asked at the very next turn.
    fresh, _, _ = disjunction(
        vq,
        facts,
        turn=2,
        a_text="Lee likes tea",
        b_text="Lee likes coffee",
        text="Tea or coffee for Lee?",
    )
    assert vq.next_question("a1", 2).candidate_id == fresh.candidate_id


def test_a_conflict_still_open_is_asked(vq, facts):
    cand, a, _b = disjunction(vq, facts, turn=0)
    facts.observe({a: "acted"})  # 0.7 / 0.5: one side ahead, the other not ruled out
    assert vq.next_question("a1", 1).candidate_id == cand.candidate_id


def test_the_seed_ranking_has_no_live_gate(qq, facts):
    cand, a, b = disjunction(qq, facts, turn=0)
    facts.observe({a: "acted", b: "contradicted"})
    assert qq.live_reason(cand) is None
    assert qq.next_question("a1", 1).candidate_id == cand.candidate_id


def test_a_conflict_with_a_side_closed_expires(vq, facts, caplog):
    caplog.set_level(logging.INFO, logger=LOGGER)
    cand, a, _b = disjunction(vq, facts, turn=0)  # no disjunction_id: no staleness check
    facts.retract(a)
    assert vq.live_reason(cand) == "conflict_closed"
    assert vq.next_question("a1", 1) is None
    assert vq.get(cand.candidate_id).status == "expired"
    expired_with(caplog, cand, "conflict_closed")


# ----------------------------------------------------------- confirmations
def test_a_weak_fact_corroborated_to_the_gate_expires(vq, facts, caplog):
    caplog.set_level(logging.INFO, logger=LOGGER)
    key = weak_fact(facts)
    cand = confirmation(vq, key, turn=0)
    assert vq.live_reason(cand) is None
    facts.observe({key: "acted"})  # 0.3 -> 0.5: the default gate (score < 0.5) lets it through
    assert facts.get(key).confidence == pytest.approx(0.5)
    assert vq.next_question("a1", 1) is None
    assert vq.get(cand.candidate_id).status == "expired"
    assert vq.store.qq_last_delivery("a1") is None
    expired_with(caplog, cand, "fact_corroborated")


def test_a_fact_at_its_prior_is_no_evidence_and_its_question_stands(vq, facts):
    """No observation at all leaves a fact at the prior (0.5, the gate's own threshold): that
    is not corroboration. Only evidence for it expires the question."""
    key = facts.add("a1", "Deploys go through the staging cluster")
    assert facts.get(key).confidence == pytest.approx(0.5) and facts.get(key).evidence_count == 0
    cand = confirmation(vq, key, turn=0)
    assert vq.live_reason(cand) is None
    assert vq.next_question("a1", 1).candidate_id == cand.candidate_id
    facts.observe({key: "contradicted"})  # evidence against: still to confirm
    assert vq.live_reason(cand) is None


def test_the_gate_threshold_is_the_one_given(store, facts):
    vq = QuestionQueue(store, facts=facts, ranking="value", gate_threshold=0.6)
    key = weak_fact(facts)
    cand = confirmation(vq, key, turn=0)
    facts.observe({key: "acted"})  # 0.5: still below 0.6, still worth confirming
    assert vq.next_question("a1", 1).candidate_id == cand.candidate_id


def test_a_forgotten_fact_is_not_confirmed(vq, facts):
    key = weak_fact(facts)
    cand = confirmation(vq, key, turn=0)
    facts.retract(key)
    assert vq.live_reason(cand) == "fact_closed"
    assert vq.expire_stale("a1", 1) == 1  # the sweep applies the same gate
    assert vq.get(cand.candidate_id).status == "expired"


def test_keys_that_are_no_facts_are_no_evidence(vq):
    cand = confirmation(vq, "k1", turn=0)
    assert vq.live_reason(cand) is None
    assert vq.next_question("a1", 1).candidate_id == cand.candidate_id


def test_a_failed_fact_read_neither_expires_nor_asks(vq, facts, monkeypatch):
    key = weak_fact(facts)
    cand = confirmation(vq, key, turn=0)
    facts.observe({key: "acted"})  # dead, but the gate cannot read that now
    other = confirmation(vq, "k1", turn=0)
    real_get = vq.facts.get

    def broken(k):
        if k == key:
            raise OSError("store gone")
        return real_get(k)

    monkeypatch.setattr(vq.facts, "get", broken)
    assert vq.next_question("a1", 1).candidate_id == other.candidate_id
    assert vq.get(cand.candidate_id).status == "pending"
    monkeypatch.setattr(vq.facts, "get", lambda k: (_ for _ in ()).throw(OSError("gone")))
    assert vq.next_question("a1", 6) is None  # every read fails: nothing asked, nothing spent
    assert vq.get(cand.candidate_id).status == "pending"
    assert vq.store.qq_last_delivery("a1") == 1


# --------------------------------------------------------------- referents
def resolution(refs, key):
    return SimpleNamespace(agent_id="a1", key=key, references_json=json.dumps(refs))


def parser_gap():
    """An evidence gap as `memory.resolve` writes it (its question quotes the surface)."""
    return {
        "surface": "the parser",
        "start": 4,
        "end": 14,
        "status": "evidence_gap",
        "candidates": ["src/parser.py", "tools/parser.py"],
        "question": "Which do you mean by 'the parser': src/parser.py or tools/parser.py?",
    }


def parser_resolved(target="src/parser.py", surface="the parser"):
    return {
        "surface": surface,
        "start": 4,
        "end": 14,
        "status": "resolved",
        "candidates": [target],
        "resolved_text": target,
    }


def test_a_reference_resolved_later_expires_its_question(vq, caplog):
    caplog.set_level(logging.INFO, logger=LOGGER)
    assert vq.propose_from_resolution(resolution([parser_gap()], "res:1"), 1) == 1
    (cand,) = vq.candidates("a1")
    vq.propose_from_resolution(resolution([parser_resolved()], "res:2"), 2)
    assert vq.get(cand.candidate_id).status == "expired"
    assert vq.next_question("a1", 2) is None
    assert vq.store.qq_last_delivery("a1") is None
    expired_with(caplog, cand, "reference_resolved")


@pytest.mark.parametrize(
    "ref",
    [
        parser_resolved(target="src/lexer.py"),  # resolved to something not offered
        parser_resolved(surface="the parse"),  # other words: whole words, not a prefix
    ],
)
def test_another_resolution_leaves_the_question(vq, ref):
    vq.propose_from_resolution(resolution([parser_gap()], "res:1"), 1)
    (cand,) = vq.candidates("a1")
    vq.propose_from_resolution(resolution([ref], "res:2"), 2)
    assert vq.get(cand.candidate_id).status == "pending"
    assert vq.next_question("a1", 2).candidate_id == cand.candidate_id


def test_the_seed_ranking_keeps_a_resolved_reference_question(qq):
    qq.propose_from_resolution(resolution([parser_gap()], "res:1"), 1)
    (cand,) = qq.candidates("a1")
    qq.propose_from_resolution(resolution([parser_resolved()], "res:2"), 2)
    assert qq.get(cand.candidate_id).status == "pending"


# ------------------------------------------------ a side picked by the request
def test_a_conflict_the_request_picks_a_side_of_waits_for_another_turn(vq, facts):
    cand, _, _ = disjunction(vq, facts, turn=0)
    assert vq.next_question("a1", 1, "book the Dana sync for the morning") is None
    left = vq.get(cand.candidate_id)
    assert (left.status, left.ask_count) == ("pending", 0)  # a request is no answer
    assert vq.store.qq_last_delivery("a1") is None  # no budget spent
    got = vq.next_question("a1", 2, "when does Dana like her meetings")
    assert got is not None and got.candidate_id == cand.candidate_id


@pytest.mark.parametrize(
    "request_text",
    [
        "morning or afternoon for the Dana meetings?",  # both sides: still open
        "book the Dana meetings",  # neither
    ],
)
def test_a_request_naming_both_sides_or_neither_leaves_the_question(vq, facts, request_text):
    cand, _, _ = disjunction(vq, facts, turn=0)
    assert vq.next_question("a1", 1, request_text).candidate_id == cand.candidate_id


def test_the_seed_ranking_asks_whatever_the_request_says(qq, facts):
    cand, _, _ = disjunction(qq, facts, turn=0)
    assert qq.next_question("a1", 1, "book the Dana sync for the morning").candidate_id == (
        cand.candidate_id
    )
