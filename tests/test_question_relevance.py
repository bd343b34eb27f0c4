"""Relevance timing matches people's words: the queue folds cue words with fact search's stemmer,
so a request times a question about the facts that request would find in search."""

from __future__ import annotations

import pytest

from talos_ls.gates.question_queue import QuestionQueue
from talos_ls.memory.reconcile import Reconciler
from talos_ls.memory.stemming import stem

AGENT = "a1"


@pytest.mark.parametrize(
    "word, folded",
    [
        ("tests", "test"),
        ("failing", "fail"),
        ("deploys", "deploy"),
        ("deployed", "deploy"),
        ("deploying", "deploy"),
        ("libraries", "library"),
        ("classes", "class"),
        ("class", "class"),  # "-ss" is not a plural
        ("buses", "bus"),
        ("used", "used"),  # a stem keeps three characters: "us" would meet too much
        ("pytest", "pytest"),
        ("running", "runn"),  # crude by design: "running" and "runs" do not meet
    ],
)
def test_stem_hand_checked(word, folded):
    assert stem(word) == folded


def ask(qq: QuestionQueue, text: str, turn: int = 0):
    cand = qq.propose(
        AGENT,
        text,
        "confirmation",
        "test",
        [f"fact:{text}"],
        "gate_refusal",
        turn,
        options=[{"label": "yes"}, {"label": "no"}],
    )
    assert cand is not None
    return cand


@pytest.mark.parametrize(
    "request_text, question, relevant",
    [
        ("fix the failing test", "Do the tests use pytest?", True),
        ("deploying to prod", "Which deploy target is right?", True),
        ("update the libraries", "Which library version is pinned?", True),
        ("rename the class", "Which classes are final?", True),
        ("the bus schedule", "Which buses run late?", True),
        ("what's for lunch", "Do the tests use pytest?", False),
        ("who used it", "Which user owns the repo?", False),
        ("run the linter", "Is running the formatter required?", False),  # see "running"
    ],
)
def test_relevance_hand_checked(qq, request_text, question, relevant):
    cand = ask(qq, question)
    got = qq.next_question(AGENT, 0, query_cues=request_text)
    assert (got is not None and got.candidate_id == cand.candidate_id) is relevant


def test_the_issue_case_a_conflict_about_tests_is_relevant_to_a_failing_test(qq, facts):
    """The case the issue names: the disjunction producer's question quotes "Tests use pytest"
    and "Tests use unittest"; "fix the failing test" shares no exact word with it."""
    rec = Reconciler(facts)
    for value in ("unittest", "pytest"):
        key = facts.add(
            AGENT,
            f"tests use {value}",
            subject="tests",
            attribute="use",
            value=value,
            source="rules file",
        )
    rec.reconcile(key)
    assert qq.propose_from_disjunctions(AGENT, 0) == 1
    assert qq.next_question(AGENT, 0, query_cues="what's for lunch") is None
    got = qq.next_question(AGENT, 0, query_cues="fix the failing test")
    assert got is not None and got.kind == "disjunction"


def test_a_list_of_cues_is_folded_too(qq):
    cand = ask(qq, "Do the tests use pytest?")
    got = qq.next_question(AGENT, 0, query_cues=["fix it", "the failing test"])
    assert got is not None and got.candidate_id == cand.candidate_id


def test_stored_cues_keep_the_words_and_add_their_stems(qq):
    cand = ask(qq, "Which deploys failed?")
    assert {"deploys", "deploy", "failed", "fail"} <= set(cand.cue_tokens)


@pytest.mark.parametrize(
    "request_text, statement",
    [
        ("fix the failing test", "tests use pytest"),
        ("deploying on friday", "deploys go through make release"),
        ("bump the libraries", "library versions are pinned"),
        ("who used the cache", "the user cache is shared"),
        ("what's for lunch", "tests use pytest"),
    ],
)
def test_relevance_agrees_with_fact_search(store, facts, request_text, statement):
    """A request times a question about a fact exactly when search finds that fact for it."""
    qq = QuestionQueue(store, facts=facts)
    key = facts.add(AGENT, statement)
    found = key in [f.key for f in facts.search(AGENT, request_text)]
    cand = ask(qq, statement)
    got = qq.next_question(AGENT, 0, query_cues=request_text)
    assert (got is not None and got.candidate_id == cand.candidate_id) is found
