"""The question queue's contract, on every backend (checklist of the reference, section 5)."""

from __future__ import annotations

import threading

import pytest

from talos_ls.gates.question_queue import (
    AMBIGUITY_SIGNALS,
    QuestionCandidate,
    QuestionQueue,
    passes_voi_gate,
)
from talos_ls.memory.facts import FactStore
from talos_ls.store import open_store

from .conftest import confirmation, disjunction

K, C = 5, 10


def budget_turn(qq: QuestionQueue, agent: str = "a1"):
    last = qq.store.qq_last_delivery(agent)
    assert qq.store.qq_agents().get(agent) == last  # the listing agrees with the one read
    return last


# ------------------------------------------------------------ propose, dedup
def test_new_candidate_fields(qq, facts):
    cand, a, b = disjunction(qq, facts, turn=7)
    assert cand.status == "pending"
    assert (cand.created_turn, cand.last_seen_turn, cand.expires_turn) == (7, 7, 27)
    assert cand.ask_count == 0 and cand.delivered_turn is None and cand.resolved_turn is None
    assert {"morning", "afternoon", "dana", "meetings"} <= set(cand.cue_tokens)
    assert cand.options == [
        {"label": "morning", "acted": [a], "contradicted": [b]},
        {"label": "afternoon", "acted": [b], "contradicted": [a]},
    ]
    assert qq.get(cand.candidate_id) == cand


def test_options_stored_with_both_lists(qq):
    cand = qq.propose(
        "a1",
        "Which parser?",
        "referent",
        "t",
        ["r#1"],
        "evidence_gap",
        0,
        options=[{"label": "src", "acted": None}, {"label": "tools"}],
    )
    assert cand.options == [
        {"label": "src", "acted": [], "contradicted": []},
        {"label": "tools", "acted": [], "contradicted": []},
    ]


def test_same_kind_shared_key_is_a_duplicate_and_touches(qq, facts):
    first, _a, b = disjunction(qq, facts, turn=0)
    again = qq.propose(
        "a1",
        "Quite another wording?",
        "disjunction",
        "reconciliation",
        [b, "other"],
        "disjunction",
        3,
    )
    assert again.candidate_id == first.candidate_id
    assert again.last_seen_turn == 3
    assert qq.get(first.candidate_id).last_seen_turn == 3
    assert len(qq.candidates("a1")) == 1


def test_touch_never_lowers_last_seen(qq, facts):
    first, a, _ = disjunction(qq, facts, turn=6)
    qq.propose("a1", "x y z?", "disjunction", "r", [a], "disjunction", 2)
    assert qq.get(first.candidate_id).last_seen_turn == 6


def test_equal_normalized_text_is_a_duplicate_across_kinds_and_keys(qq):
    first = qq.propose("a1", "Morning or afternoon?", "disjunction", "r", ["k1"], "disjunction", 0)
    again = qq.propose(
        "a1", "  morning,  OR afternoon ", "confirmation", "r", ["k9"], "gate_refusal", 1
    )
    assert again.candidate_id == first.candidate_id
    assert len(qq.candidates("a1")) == 1


def test_same_keys_other_kind_is_new(qq):
    first = qq.propose("a1", "Is k1 right?", "confirmation", "r", ["k1"], "gate_refusal", 0)
    other = qq.propose("a1", "Which k1?", "referent", "r", ["k1"], "evidence_gap", 0)
    assert other.candidate_id != first.candidate_id
    assert len(qq.candidates("a1")) == 2


def test_other_agent_is_never_a_duplicate(qq):
    first = qq.propose("a1", "Is k1 right?", "confirmation", "r", ["k1"], "gate_refusal", 0)
    other = qq.propose("a2", "Is k1 right?", "confirmation", "r", ["k1"], "gate_refusal", 0)
    assert other.candidate_id != first.candidate_id


def test_oldest_match_wins(qq):
    old = qq.propose("a1", "first?", "confirmation", "r", ["k1"], "gate_refusal", 0)
    qq.propose("a1", "second?", "confirmation", "r", ["k2"], "gate_refusal", 1)
    both = qq.propose("a1", "third?", "confirmation", "r", ["k2", "k1"], "gate_refusal", 2)
    assert both.candidate_id == old.candidate_id


def test_answered_suppresses_duplicates_within_retention(qq, facts):
    cand, a, _ = disjunction(qq, facts, turn=0)
    assert qq.record_answer(cand, "morning", 1).applied
    again = qq.propose("a1", "new words?", "disjunction", "r", [a], "disjunction", 501)
    assert again.candidate_id == cand.candidate_id and again.status == "answered"
    assert again.last_seen_turn == 0  # returned unchanged
    fresh = qq.propose("a1", "new words?", "disjunction", "r", [a], "disjunction", 502)
    assert fresh.candidate_id != cand.candidate_id and fresh.status == "pending"


def test_expired_is_never_a_duplicate(qq, facts):
    cand, a, _ = disjunction(qq, facts, turn=0)
    at_20 = qq.propose("a1", "other words?", "disjunction", "r", [a], "disjunction", 20)
    assert at_20.candidate_id == cand.candidate_id
    at_21 = qq.propose("a1", "other words?", "disjunction", "r", [a], "disjunction", 21)
    assert at_21.candidate_id != cand.candidate_id


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"kind": "guess"}, "unknown kind"),
        ({"ambiguity_signal": "judge_abstention"}, "unknown ambiguity_signal"),
        ({"question_text": " ?!… "}, "empty"),
        ({"options": [{"label": "x", "acted": ["k"], "contradicted": ["k"]}]}, "both acted"),
        ({"options": [{"label": "  "}]}, "label"),
        ({"options": [{"label": 3}]}, "label"),
        ({"options": ["yes"]}, "must be a dict"),
        ({"options": [{"label": "x", "acted": "k1"}]}, "list of keys"),
        ({"target_keys": "k1"}, "list of keys"),
        ({"turn": "soon"}, "turn"),
        ({"agent_id": ""}, "agent_id"),
    ],
)
def test_producer_bugs_raise_value_error(qq, kwargs, match):
    args = dict(
        agent_id="a1",
        question_text="Which one?",
        kind="referent",
        source_module="t",
        target_keys=["k"],
        ambiguity_signal="evidence_gap",
        turn=0,
    )
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        qq.propose(**args)
    assert qq.store.qq_list() == []


def test_concurrent_identical_proposals_leave_one(store_url):
    store = open_store(store_url)
    qq = QuestionQueue(store)
    ids, barrier = [], threading.Barrier(8)

    def worker():
        barrier.wait()
        c = qq.propose("a1", "Tabs or spaces?", "disjunction", "r", ["k1", "k2"], "disjunction", 4)
        ids.append(c.candidate_id)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(ids) == 8 and len(set(ids)) == 1
    assert [c.candidate_id for c in qq.candidates("a1")] == ids[:1]
    store.close()


# ------------------------------------------------------------ VOI gate, budget
def test_voi_truth_table():
    def cand(signal, seen):
        return QuestionCandidate(
            "c", "a", "q?", "referent", "t", ambiguity_signal=signal, last_seen_turn=seen
        )

    assert passes_voi_gate(cand("evidence_gap", 10), 10)
    assert passes_voi_gate(cand("evidence_gap", 5), 10)
    assert not passes_voi_gate(cand("evidence_gap", 4), 10)
    assert not passes_voi_gate(cand("", 10), 10)
    assert not passes_voi_gate(cand("", 4), 10)
    assert not passes_voi_gate(cand("evidence_gap", 11), 10)  # seen in the future
    assert all(passes_voi_gate(cand(s, 10), 10) for s in AMBIGUITY_SIGNALS)


def test_not_recently_used_is_not_delivered_until_note_use(qq, facts):
    cand, a, _ = disjunction(qq, facts, turn=0)
    assert qq.next_question("a1", 6) is None
    assert budget_turn(qq) is None
    assert qq.note_use("a1", [a, "unrelated"], 6) == 1
    got = qq.next_question("a1", 6)
    assert got.candidate_id == cand.candidate_id
    assert (got.status, got.ask_count, got.delivered_turn) == ("delivered", 1, 6)
    stored = qq.get(cand.candidate_id)
    assert (stored.status, stored.ask_count, stored.delivered_turn) == ("delivered", 1, 6)
    assert budget_turn(qq) == 6


def test_note_use_counts_only_raises(qq, facts):
    cand, a, b = disjunction(qq, facts, turn=3)
    assert qq.note_use("a1", [a], 3) == 0  # same turn
    assert qq.note_use("a1", [a], 2) == 0  # older turn
    assert qq.note_use("a1", [], 9) == 0
    assert qq.note_use("a1", [a, b], 4) == 1
    assert qq.note_use("a2", [a], 9) == 0  # another agent's keys
    assert qq.note_use("a1", [a], 24) == 0  # past expiry (created 3, expires 23)
    assert qq.get(cand.candidate_id).last_seen_turn == 4


def test_budget_one_per_k_and_regressed_turn_never_rewinds(qq):
    for i in range(4):
        qq.propose("a1", f"Question {i}?", "referent", "t", [f"k{i}"], "evidence_gap", 10)
    assert qq.next_question("a1", 10) is not None
    assert budget_turn(qq) == 10
    for turn in (9, 3, 11, 14):
        qq.note_use("a1", ["k0", "k1", "k2", "k3"], turn)
        assert qq.next_question("a1", turn) is None
    assert budget_turn(qq) == 10
    assert qq.next_question("a1", 15) is not None
    assert budget_turn(qq) == 15


def test_budget_survives_restart(store_url):
    s1 = open_store(store_url)
    q1 = QuestionQueue(s1)
    for i in range(2):
        q1.propose("a1", f"Q{i}?", "referent", "t", [f"k{i}"], "evidence_gap", 0)
    assert q1.next_question("a1", 0) is not None
    s1.close()
    s2 = open_store(store_url)
    q2 = QuestionQueue(s2)
    q2.note_use("a1", ["k0", "k1"], 4)
    assert q2.next_question("a1", 4) is None
    assert q2.next_question("a1", 5) is not None
    s2.close()


def test_nothing_eligible_spends_no_budget(qq, facts):
    disjunction(qq, facts, turn=0)
    assert qq.next_question("a1", 0, query_cues="what's for lunch") is None
    assert qq.next_question("a1", 9) is None  # not recently used
    assert budget_turn(qq) is None
    assert qq.next_question("a2", 0) is None
    assert "a2" not in qq.store.qq_agents()


def test_candidate_lost_between_read_and_claim(qq):
    a = qq.propose("a1", "Alpha?", "referent", "t", ["ka"], "evidence_gap", 2)
    b = qq.propose("a1", "Beta?", "referent", "t", ["kb"], "evidence_gap", 1)

    def steal(cand, turn):  # runs after the read, before the atomic claim
        if cand.candidate_id == a.candidate_id:
            qq.record_answer(qq.get(a.candidate_id), "skip", turn)  # deflection-cooled
        return False

    qq.register_staleness_check("referent", steal)
    got = qq.next_question("a1", 2)
    assert got.candidate_id == b.candidate_id
    assert (got.status, got.ask_count, got.delivered_turn) == ("delivered", 1, 2)
    assert budget_turn(qq) == 2


def test_only_candidate_lost_spends_no_budget(qq):
    a = qq.propose("a1", "Alpha?", "referent", "t", ["ka"], "evidence_gap", 0)

    def expire_it(cand, turn):
        qq.store.qq_claim("a1", cand.candidate_id, ["pending"], {"status": "expired"})
        return False

    qq.register_staleness_check("referent", expire_it)
    assert qq.next_question("a1", 0) is None
    assert qq.get(a.candidate_id).status == "expired"
    assert budget_turn(qq) is None


def test_impact_order(qq):
    old = qq.propose("a1", "Old?", "referent", "t", ["k1"], "evidence_gap", 0)
    new = qq.propose("a1", "New?", "referent", "t", ["k2"], "evidence_gap", 1)
    assert qq.next_question("a1", 1).candidate_id == new.candidate_id  # most recently seen
    qq.note_use("a1", ["k1"], 6)
    qq.note_use("a1", ["k2"], 6)
    # Same last_seen: the less-asked one goes first.
    assert qq.next_question("a1", 6).candidate_id == old.candidate_id


# -------------------------------------------------- expiry, staleness, timing
def test_expiry_is_strict(qq, facts):
    cand, a, _ = disjunction(qq, facts, turn=0)
    other, c, _ = disjunction(
        qq, facts, turn=0, text="Tabs or spaces?", a_text="tabs", b_text="spaces"
    )
    qq.note_use("a1", [c], 20)
    assert qq.next_question("a1", 20).candidate_id == other.candidate_id  # created + 20: ok
    qq.note_use("a1", [a], 21)
    assert qq.next_question("a1", 26) is None
    stored = qq.get(cand.candidate_id)
    assert (stored.status, stored.resolved_turn) == ("expired", 26)


def test_expired_at_21_is_not_delivered_but_kept(qq, facts):
    cand, a, _ = disjunction(qq, facts, turn=0)
    qq.note_use("a1", [a], 21)
    assert qq.next_question("a1", 21) is None
    stored = qq.get(cand.candidate_id)
    assert (stored.status, stored.resolved_turn, stored.ask_count) == ("expired", 21, 0)
    assert budget_turn(qq) is None


def test_staleness_check_expires_instead_of_asking(qq):
    cand = qq.propose("a1", "Which config?", "referent", "t", ["r#0:3"], "evidence_gap", 0)

    def stale(c, turn):
        return c.candidate_id == cand.candidate_id

    qq.register_staleness_check("referent", stale)
    qq.register_staleness_check("referent", stale)  # idempotent
    assert qq.next_question("a1", 0) is None
    assert qq.get(cand.candidate_id).status == "expired"
    assert budget_turn(qq) is None
    qq.unregister_staleness_check("referent", stale)
    other = qq.propose("a1", "Which test?", "referent", "t", ["r#5:9"], "evidence_gap", 1)
    assert qq.next_question("a1", 1).candidate_id == other.candidate_id


def test_failing_staleness_check_neither_expires_nor_delivers(qq):
    cand = qq.propose("a1", "Which config?", "referent", "t", ["r"], "evidence_gap", 0)

    def broken(c, turn):
        raise RuntimeError("source unreadable")

    qq.register_staleness_check("referent", broken)
    assert qq.next_question("a1", 0) is None
    assert qq.expire_stale("a1", 0) == 0
    assert qq.get(cand.candidate_id).status == "pending"
    assert budget_turn(qq) is None


def test_unknown_kind_in_register_raises(qq):
    with pytest.raises(ValueError, match="unknown kind"):
        qq.register_staleness_check("rumour", lambda c, t: True)


def test_staleness_check_expires_a_delivered_candidate(qq):
    cand = qq.propose("a1", "Which config?", "referent", "t", ["r"], "evidence_gap", 0)
    assert qq.next_question("a1", 0) is not None
    qq.register_staleness_check("referent", lambda c, t: True)
    assert qq.expire_stale("a1", 1) == 1
    assert qq.get(cand.candidate_id).status == "expired"


def test_relevance_timing(qq):
    cand = qq.propose(
        "a1", "Should the deploy run on Fridays?", "confirmation", "t", ["k"], "gate_refusal", 0
    )
    assert qq.next_question("a1", 0, query_cues="what's for lunch") is None
    assert qq.next_question("a1", 0, query_cues=["kick off the DEPLOY"]).candidate_id == (
        cand.candidate_id
    )
    other = qq.propose("a1", "Lunch at noon?", "confirmation", "t", ["k2"], "gate_refusal", 5)
    assert qq.next_question("a1", 5, query_cues=None).candidate_id == other.candidate_id


def test_relevance_timing_for_non_latin_questions(qq):
    cand = qq.propose("a1", "部署会议改到周五吗？", "confirmation", "t", ["k"], "gate_refusal", 0)
    assert qq.next_question("a1", 0, query_cues="午餐吃什么") is None
    assert qq.next_question("a1", 0, query_cues="明天的会议").candidate_id == cand.candidate_id


def test_deflection_cools_then_redelivers(qq, facts):
    cand, a, _ = disjunction(qq, facts, turn=0)
    assert qq.next_question("a1", 0) is not None
    res = qq.record_answer(cand, "Skip!", 1)
    assert (res.applied, res.reason, res.classification) == (False, "cooled", "deflected")
    stored = qq.get(cand.candidate_id)
    assert (stored.status, stored.cooldown_until, stored.resolved_turn) == ("cooled", 11, 1)
    qq.note_use("a1", [a], 10)
    assert qq.next_question("a1", 10) is None
    qq.note_use("a1", [a], 11)
    again = qq.next_question("a1", 11)
    assert (again.candidate_id, again.ask_count, again.delivered_turn) == (cand.candidate_id, 2, 11)
    assert again.resolved_turn is None  # cleared on re-delivery
    assert qq.get(cand.candidate_id).resolved_turn is None


def test_ignored_question_cools_and_is_reasked(qq, facts):
    ignored, a, _ = disjunction(qq, facts, turn=0)
    assert qq.next_question("a1", 0).candidate_id == ignored.candidate_id
    for turn in range(1, C - 2):
        qq.propose(
            "a1", "Morning or afternoon, really?", "disjunction", "r", [a], "disjunction", turn
        )
        qq.note_use("a1", [a], turn)
        assert qq.next_question("a1", turn) is None  # waiting for its reply: never re-asked
    other = qq.propose("a1", "Tabs?", "confirmation", "t", ["tabs"], "gate_refusal", C - 2)
    assert qq.next_question("a1", C - 2).candidate_id == other.candidate_id
    qq.note_use("a1", [a], C)
    assert qq.next_question("a1", C) is None  # budget spent at C - 2
    qq.expire_stale("a1", C)
    stored = qq.get(ignored.candidate_id)
    assert (stored.status, stored.cooldown_until, stored.ask_count) == ("cooled", C, 1)
    qq.note_use("a1", [a], C - 2 + K)
    again = qq.next_question("a1", C - 2 + K)
    assert again.candidate_id == ignored.candidate_id
    assert (again.ask_count, again.delivered_turn) == (2, C - 2 + K)


def test_cooled_as_ignored_can_be_redelivered_in_the_same_pass(qq):
    cand = qq.propose("a1", "Which parser?", "referent", "t", ["k"], "evidence_gap", 0)
    assert qq.next_question("a1", 0) is not None
    qq.note_use("a1", ["k"], C)
    again = qq.next_question("a1", C)
    assert (again.candidate_id, again.ask_count, again.delivered_turn) == (cand.candidate_id, 2, C)


def test_late_reply_to_ignored_question_is_not_open(qq, facts):
    cand, a, _ = disjunction(qq, facts, turn=0)
    qq.next_question("a1", 0)
    assert qq.expire_stale("a1", C) == 0
    res = qq.record_answer(cand, "morning", C)
    assert (res.applied, res.reason) == (False, "not_open")
    assert facts.get(a).evidence_count == 0


def test_pass_at_c_cannot_cool_a_redelivered_question(qq, facts):
    cand, a, _ = disjunction(qq, facts, turn=0)
    qq.next_question("a1", 0)
    qq.note_use("a1", [a], C)
    assert qq.next_question("a1", C).delivered_turn == C  # cooled and re-delivered at C
    assert qq.expire_stale("a1", C) == 0
    assert qq.get(cand.candidate_id).status == "delivered"
    assert qq.record_answer(cand, "morning", C + 1).applied


def test_delivered_row_without_delivered_turn_cools_from_created_turn(qq):
    cand = qq.propose("a1", "Which parser?", "referent", "t", ["k"], "evidence_gap", 3)
    qq.next_question("a1", 3)
    assert qq.store.qq_claim("a1", cand.candidate_id, ["delivered"], {"delivered_turn": None})
    qq.expire_stale("a1", 3 + C - 1)
    assert qq.get(cand.candidate_id).status == "delivered"
    qq.expire_stale("a1", 3 + C)
    stored = qq.get(cand.candidate_id)
    assert (stored.status, stored.cooldown_until) == ("cooled", 3 + C)


def test_expire_stale_counts_expired_not_cooled(qq):
    qq.propose("a1", "One?", "referent", "t", ["k1"], "evidence_gap", 0)
    two = qq.propose("a1", "Two?", "referent", "t", ["k2"], "evidence_gap", 0)
    qq.note_use("a1", ["k2"], 15)
    assert qq.next_question("a1", 15).candidate_id == two.candidate_id
    assert qq.expire_stale("a1", 20) == 0
    assert qq.expire_stale("a1", 21) == 1  # the pending one; the delivered one waits
    statuses = sorted(c.status for c in qq.candidates("a1"))
    assert statuses == ["delivered", "expired"]


# --------------------------------------------------------------- answers
def test_answered_disjunction_is_weighted_evidence(qq, facts):
    cand, a, b = disjunction(qq, facts, turn=0)
    qq.next_question("a1", 0)
    res = qq.record_answer(cand, "Morning.", 1)
    assert (res.applied, res.reason, res.classification, res.option_index) == (
        True,
        "applied",
        "answered",
        0,
    )
    fa, fb = facts.get(a), facts.get(b)
    assert fa.confidence == pytest.approx(0.8) and fa.corroborations == 3
    assert fb.confidence == pytest.approx(0.2) and fb.contradictions == 3
    assert fa.evidence_count == fb.evidence_count == 3
    stored = qq.get(cand.candidate_id)
    assert (stored.status, stored.answer_option, stored.resolved_turn) == ("answered", 0, 1)
    assert cand.status == "answered"  # the caller's object follows the claim
    # Evidence, never an overwrite: no validity interval closed.
    assert fa.live and fb.live and fb.superseded_by is None


def test_answer_by_number(qq, facts):
    cand, a, b = disjunction(qq, facts, turn=0)
    res = qq.record_answer(cand, "2", 0)  # a pending candidate can be answered too
    assert (res.applied, res.option_index) == (True, 1)
    assert facts.get(b).confidence > 0.5 > facts.get(a).confidence


def test_gate_refusal_answered_no_lowers_confidence(qq, facts):
    key = facts.add("a1", "deploys go through make release")
    cand = confirmation(qq, key)
    assert qq.record_answer(cand, "no", 1).applied
    assert facts.get(key).confidence < 0.5


def test_unknown_target_keys_are_skipped(qq):
    cand = qq.propose(
        "a1",
        "Which parser?",
        "referent",
        "t",
        ["rec#ref:4:10"],
        "evidence_gap",
        0,
        options=[{"label": "src/parser.py", "acted": ["nope"]}, {"label": "tools/parser.py"}],
    )
    res = qq.record_answer(cand, "tools/parser.py", 1)
    assert (res.applied, res.option_index) == (True, 1)
    assert qq.get(cand.candidate_id).answer_option == 1
    res = qq.record_answer(
        qq.propose(
            "a1",
            "Other?",
            "referent",
            "t",
            ["z"],
            "evidence_gap",
            1,
            options=[{"label": "x", "acted": ["missing"]}],
        ),
        "x",
        1,
    )
    assert res.applied


@pytest.mark.parametrize("cap", [20, 3])
def test_answers_are_defeasible(store, cap):
    facts = FactStore(store, evidence_cap=cap)
    qq = QuestionQueue(store, facts=facts)
    key = facts.add("a1", "the build uses make")
    if cap == 3:
        facts.observe({key: "acted"}, weight=5)  # saturated
    cand = confirmation(qq, key)
    qq.record_answer(cand, "yes", 1)
    before = facts.get(key).confidence
    facts.observe({key: "contradicted"})
    assert facts.get(key).confidence < before


@pytest.mark.parametrize("reply", ["pass", "morning, I think", "3", "", "   "])
def test_non_answers_leave_facts_bit_identical(qq, facts, reply):
    cand, a, b = disjunction(qq, facts, turn=0)
    facts.observe({a: "acted", b: "contradicted"})
    before = (facts.get(a), facts.get(b))
    qq.next_question("a1", 0)
    res = qq.record_answer(cand, reply, 2)
    assert (res.applied, res.reason) == (False, "cooled")
    assert (facts.get(a), facts.get(b)) == before
    assert qq.get(cand.candidate_id).answer_option is None


def test_second_answer_is_not_open(qq, facts):
    cand, a, b = disjunction(qq, facts, turn=0)
    assert qq.record_answer(cand, "morning", 1).applied
    before = (facts.get(a), facts.get(b))
    res = qq.record_answer(cand, "afternoon", 2)
    assert (res.applied, res.reason, res.option_index) == (False, "not_open", 1)
    assert (facts.get(a), facts.get(b)) == before
    assert qq.get(cand.candidate_id).answer_option == 0
    assert qq.record_answer(cand, "skip", 3).reason == "not_open"


def test_candidate_without_options_can_never_be_answered(qq):
    cand = qq.propose("a1", "Anything else?", "referent", "t", ["k"], "evidence_gap", 0)
    assert qq.record_answer(cand, "1", 0).classification == "unrecognized"


def test_dismissal_is_not_an_answer(qq, facts):
    # An editor's dismissal reaches the queue as an empty reply: a non-answer.
    cand, a, _ = disjunction(qq, facts, turn=0)
    qq.next_question("a1", 0)
    assert qq.record_answer(cand, "", 1).classification == "unrecognized"
    assert facts.get(a).evidence_count == 0


def test_stored_types_round_trip(qq, facts):
    cand, _, _ = disjunction(qq, facts, turn=0)
    qq.next_question("a1", 0)
    stored = qq.get(cand.candidate_id)
    for name in ("ask_count", "delivered_turn", "created_turn", "expires_turn", "last_seen_turn"):
        assert type(getattr(stored, name)) is int, name
    assert type(stored.status) is str and type(stored.candidate_id) is str


# ------------------------------------------------------------------ prune
def test_prune_keeps_pending_and_is_strict(qq, facts):
    answered, _, _ = disjunction(qq, facts, turn=0)
    qq.record_answer(answered, "morning", 0)
    pending = qq.propose("a1", "Still open?", "referent", "t", ["k"], "evidence_gap", 0)
    assert qq.prune("a1", 500) == 0
    assert qq.prune("a1", 501) == 1
    assert qq.get(answered.candidate_id) is None
    assert qq.get(pending.candidate_id).status == "pending"
    # A pruned candidate no longer blocks the same question.
    again = qq.propose(
        "a1",
        "Does Dana prefer morning or afternoon meetings?",
        "disjunction",
        "r",
        ["x"],
        "disjunction",
        501,
    )
    assert again.candidate_id != answered.candidate_id


# ------------------------------------------------------------ kill switch
@pytest.mark.parametrize("value", ["1", "true", " YES ", "On"])
def test_kill_switch(qq, facts, monkeypatch, value):
    cand, a, _ = disjunction(qq, facts, turn=0)
    monkeypatch.setenv("TALOS_QUESTION_QUEUE_DISABLE", value)
    assert qq.propose("a1", "New?", "referent", "t", ["n"], "evidence_gap", 0) is None
    with pytest.raises(ValueError):
        qq.propose("a1", "New?", "nonsense", "t", ["n"], "evidence_gap", 0)
    assert qq.next_question("a1", 0) is None
    assert qq.note_use("a1", [a], 1) == 0
    assert qq.expire_stale("a1", 99) == 0
    assert qq.prune("a1", 9999) == 0
    res = qq.record_answer(cand, "morning", 1)
    assert (res.applied, res.reason) == (False, "disabled")
    assert qq.propose_from_resolution(object(), 0) == 0
    assert qq.propose_from_disjunctions("a1", 0) == 0
    assert (
        qq.propose_from_gate(
            "a1", {"gate": {"gated": True, "mode": "refuse", "refused_keys": [a]}}, 0, "x"
        )
        is None
    )
    assert len(qq.candidates("a1")) == 1 and qq.get(cand.candidate_id).status == "pending"
    monkeypatch.setenv("TALOS_QUESTION_QUEUE_DISABLE", "0")
    assert qq.next_question("a1", 0).candidate_id == cand.candidate_id


def test_overrides_change_the_rules(store):
    qq = QuestionQueue(store, budget_turns=2, expiry_turns=3, cooldown_turns=1, answer_weight=1)
    facts = qq.facts
    key = facts.add("a1", "uses make")
    cand = confirmation(qq, key)
    assert cand.expires_turn == 3
    assert qq.next_question("a1", 0) is not None
    qq.record_answer(cand, "yes", 0)
    assert facts.get(key).evidence_count == 1
    with pytest.raises(ValueError, match="budget_turns"):
        QuestionQueue(store, budget_turns=-1)
    with pytest.raises(ValueError, match="answer_weight"):
        QuestionQueue(store, answer_weight=0)


def test_thread_hammer_two_agents(qq):
    """8 threads share one queue, 4 per agent, in lockstep over 600 turns with note_use every
    turn: each agent's deliveries land exactly on 0, K, 2K, ... and nothing is delivered twice."""
    turns, agents = 600, ("a1", "a2")
    barrier = threading.Barrier(8)
    delivered: dict[str, list[tuple[int, str]]] = {a: [] for a in agents}
    errors = []

    def worker(agent):
        try:
            for turn in range(turns):
                barrier.wait(timeout=30)
                group = turn // 3
                qq.propose(
                    agent, f"Q{group}?", "referent", "t", [f"k{group}"], "evidence_gap", turn
                )
                qq.note_use(agent, [f"k{group}"], turn)
                got = qq.next_question(agent, turn)
                if got is not None:
                    delivered[agent].append((turn, got.candidate_id))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=worker, args=(agents[i % 2],)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for agent in agents:
        got = sorted(delivered[agent])
        assert [t for t, _ in got] == list(range(0, turns, K)), agent
        assert all(qq.get(cid).ask_count == 1 for _, cid in got)
        assert budget_turn(qq, agent) == turns - K


def test_turn_counter_is_stored_and_shared(store_url):
    first, second = open_store(store_url), open_store(store_url)
    assert first.turn_current("w") == 0
    assert [first.turn_next("w"), second.turn_next("w"), first.turn_next("w")] == [1, 2, 3]
    assert second.turn_current("w") == 3 and second.turn_current("other") == 0
    first.close()
    second.close()
    assert open_store(store_url).turn_current("w") == 3  # survives a restart
