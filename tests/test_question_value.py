"""The value ranking (`QuestionQueue(..., ranking="value")`): `use x closeness x exactness`,
checked on hand-computed cases, then the worked example of docs/question-queue.md on every
backend, where the value ranking asks a different question than the seed's order."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from talos_ls.gates import question_value as qv
from talos_ls.gates.question_queue import QuestionCandidate, QuestionQueue
from talos_ls.memory.reconcile import Reconciler

from .test_live_gate import parser_gap


def fact(confidence, slot=False, live=True):
    return SimpleNamespace(
        confidence=confidence,
        subject="tests" if slot else None,
        value="pytest" if slot else None,
        live=live,
    )


def lookup_of(facts):
    return facts.get


PRODUCERS = {  # each kind's producer: its questions are a template around their subject
    "disjunction": "reconciliation",
    "confirmation": "context_assembler.confidence_gate",
    "referent": "extraction.resolution",
}


def cand(options, text="Which one?", last_seen=10, kind="disjunction", keys=(), source=None):
    return QuestionCandidate(
        candidate_id="c",
        agent_id="a1",
        question_text=text,
        kind=kind,
        source_module=source or PRODUCERS[kind],
        target_keys=list(keys),
        options=options,
        ambiguity_signal="disjunction",
        last_seen_turn=last_seen,
    )


def mirrored(a="fa", b="fb"):
    return [
        {"label": "A", "acted": [a], "contradicted": [b]},
        {"label": "B", "acted": [b], "contradicted": [a]},
    ]


YES_NO = [{"label": "yes", "acted": ["k"]}, {"label": "no", "contradicted": ["k"]}]


# -------------------------------------------------------------- closeness
@pytest.mark.parametrize(
    ("ca", "cb", "expected"),
    [
        (0.5, 0.5, 1.0),  # supports 0.5 / 0.5
        (0.65, 0.35, 0.7),  # supports (0.65 + 0.65) / 2 = 0.65 and 0.35
        (0.7, 0.5, 0.8),  # supports (0.7 + 0.5) / 2 = 0.6 and (0.5 + 0.3) / 2 = 0.4
    ],
)
def test_closeness_of_a_conflict(ca, cb, expected):
    look = lookup_of({"fa": fact(ca), "fb": fact(cb)})
    assert qv.closeness(cand(mirrored()), look) == pytest.approx(expected)


@pytest.mark.parametrize(("c", "expected"), [(0.5, 1.0), (0.3, 0.6), (0.2, 0.4)])
def test_closeness_of_a_yes_no_is_one_minus_the_gap_to_its_negation(c, expected):
    look = lookup_of({"k": fact(c)})
    assert qv.closeness(cand(YES_NO), look) == pytest.approx(expected)


def test_options_without_facts_are_a_tie():
    referent = [{"label": "src/parser.py"}, {"label": "tools/parser.py"}]
    assert qv.closeness(cand(referent), lookup_of({})) == 1.0
    # A closed fact is no evidence: the supports are 0.7 (fa acted) and 1 - 0.7 (fa
    # contradicted), not (0.7 + 0.9) / 2 and (0.1 + 0.3) / 2; 1 - (0.7 - 0.3) = 0.6.
    look = lookup_of({"fa": fact(0.7), "fb": fact(0.1, live=False)})
    assert qv.closeness(cand(mirrored()), look) == pytest.approx(0.6)


# -------------------------------------------------------------- exactness
def test_precision_of_one_option():
    look = lookup_of({"s": fact(0.5, slot=True), "f": fact(0.5)})
    assert qv.option_precision({"acted": ["s"], "contradicted": ["f"]}, look) == 1.0
    assert qv.option_precision({"acted": ["f"]}, look) == 0.75
    assert qv.option_precision({"acted": ["unknown"]}, look) == 0.75
    assert qv.option_precision({"acted": ["s", "f"]}, look) == pytest.approx(0.875 / 2)
    assert qv.option_precision({"contradicted": ["s"]}, look) == 0.5
    assert qv.option_precision({"contradicted": ["s", "f"]}, look) == 0.25
    assert qv.option_precision({"label": "src/parser.py"}, look) == 1.0


def test_a_slot_disjunction_is_exact_and_a_broad_yes_no_is_not():
    slots = lookup_of({"fa": fact(0.5, slot=True), "fb": fact(0.5, slot=True)})
    assert qv.exactness(cand(mirrored()), slots) == 1.0
    statements = lookup_of({"fa": fact(0.5), "fb": fact(0.5)})
    assert qv.exactness(cand(mirrored()), statements) == 0.75
    assert qv.exactness(cand(YES_NO), lookup_of({"k": fact(0.3)})) == 0.625  # (0.75 + 0.5) / 2
    many = [f"k{i}" for i in range(4)]
    broad = [{"label": "yes", "acted": many}, {"label": "no", "contradicted": many}]
    # yes: 0.75 / 4 = 0.1875; no: 0.5 / 4 = 0.125; mean 0.15625
    assert qv.exactness(cand(broad), lookup_of({})) == 0.15625
    assert qv.exactness(cand([]), lookup_of({})) == 0.0


# -------------------------------------------------------------------- use
def statement(text):
    return SimpleNamespace(statement=text, confidence=0.5, live=True)


def test_use_is_recency_and_overlap():
    look = lookup_of({"fa": statement("Tests use pytest"), "fb": statement("Tests use unittest")})
    c = cand(mirrored(), text="Which is right, 'A' or 'B'?", keys=("fa", "fb"))
    assert qv.use(c, 10, None, look) == 1.0  # used this turn, no request: recency alone
    assert qv.use(c, 12, None, look) == pytest.approx(1 / 3)
    none = qv.request_stems("deploy to staging")
    assert qv.use(c, 10, none, look) == 0.5  # (1 + 0) / 2
    one = qv.request_stems("fix the failing test")  # "tests" and "test" meet as "test"
    assert qv.use(c, 10, one, look) == 0.75  # (1 + 1/2) / 2
    two = qv.request_stems("run the tests with pytest")  # test, pytest: the facts' words
    assert qv.use(c, 11, two, look) == pytest.approx((1 / 2 + 2 / 3) / 2)
    template = qv.request_stems("which is right? use two spaces")  # the question's own words
    assert qv.use(c, 10, template, look) == 0.5 and not qv.about_request(c, template, look, 10)


@pytest.mark.parametrize(
    ("request_text", "about"),
    [
        ("which one is right to use here?", False),  # the template's words, and "use"
        ("say what the two notes mean", False),
        ("make the tests faster", True),  # the slot: "tests"
        ("switch to unittest", True),  # a value
    ],
)
def test_a_conflict_is_about_its_facts_not_its_wording(request_text, about):
    look = lookup_of({"fa": statement("Tests use pytest"), "fb": statement("Tests use unittest")})
    text = (
        'Two notes conflict: CLAUDE.md says "Tests use pytest"; AGENTS.md says "Tests use '
        'unittest". Which is right?'
    )
    c = cand([{"label": "pytest"}, {"label": "unittest"}], text=text, keys=("fa", "fb"))
    assert qv.subject_stems(c, look) == {"test", "pytest", "unittest"}
    assert qv.about_request(c, qv.request_stems(request_text), look, 10) is about


def test_a_referent_is_about_its_words_and_files_and_asked_when_referred_to_again():
    text = "Which do you mean by 'the parser': src/parser.py or tools/parser.py?"
    labels = [{"label": "src/parser.py"}, {"label": "tools/parser.py"}]
    c = cand(labels, text=text, kind="referent", keys=("res:1#ref:4:14",), last_seen=9)
    look = lookup_of({})
    assert qv.subject_stems(c, look) == {"parser"}  # not src, tools, which, mean
    # words shared or not, what counts is this turn's request making the reference again
    assert not qv.about_request(c, qv.request_stems("the parser tests are slow"), look, 10)
    assert qv.about_request(c, qv.request_stems("speed it up"), look, 9)  # re-proposed at 9
    assert qv.about_request(c, None, look, 10)  # no request: timing is off


@pytest.mark.parametrize(
    ("request_text", "about"),
    [
        ("the cache returns stale data", False),  # the claim's topic only
        ("safe mode should skip the plugins", False),  # one word, another sense
        ("is the cache thread safe?", True),  # what the claim says of it
        ("make the cache code thread-safe", True),
    ],
)
def test_a_confirmation_is_about_a_request_that_touches_its_claim(request_text, about):
    look = lookup_of({"k": statement("The cache code is thread-safe")})
    c = cand(YES_NO, text="Is it still accurate?", kind="confirmation", keys=("k",))
    assert qv.subject_stems(c, look) == {"cache", "thread", "safe"}  # "code": boilerplate
    assert qv.about_request(c, qv.request_stems(request_text), look, 10) is about


def test_a_question_the_model_wrote_is_all_subject():
    """The model's `ask` has no template: its own words (but the common ones) and labels."""
    labels = [{"label": "postgres"}, {"label": "sqlite"}]
    c = cand(labels, text="Which database do we use?", kind="referent", source="agent.ask")
    assert qv.subject_stems(c, lookup_of({})) == {"database", "postgr", "sqlite"}  # stemmed
    assert qv.about_request(c, qv.request_stems("the database again"), lookup_of({}), 10)
    assert not qv.about_request(c, qv.request_stems("which one do we use?"), lookup_of({}), 10)


# ------------------------------------------------------------------- rank
def test_value_and_rank():
    look = lookup_of({"fa": fact(0.5, slot=True), "fb": fact(0.5, slot=True), "k": fact(0.3)})
    conflict = cand(mirrored(), last_seen=9)  # use 1/2 x closeness 1 x exactness 1
    confirm = cand(YES_NO, last_seen=10, kind="confirmation")  # 1 x 0.6 x 0.625
    assert qv.value(conflict, 10, None, look) == 0.5
    assert qv.value(confirm, 10, None, look) == 0.375
    assert qv.rank([confirm, conflict], 10, None, look) == [conflict, confirm]


def test_equal_values_keep_the_store_order():
    look = lookup_of({})
    first = cand([{"label": "a"}, {"label": "b"}])
    second = cand([{"label": "c"}, {"label": "d"}])
    assert qv.rank([first, second], 10, None, look) == [first, second]
    assert qv.rank([second, first], 10, None, look) == [second, first]


def test_value_is_rounded_so_float_noise_does_not_break_ties():
    look = lookup_of({"fa": fact(0.1 + 0.2), "fb": fact(0.3)})
    assert qv.value(cand(mirrored()), 10, None, look) == 0.75


# ---------------------------------------------------- the documented example
REQUEST = "fix the failing test in the parser"


def worked_example(store, facts, ranking):
    """docs/question-queue.md, "The value ranking": three eligible questions at turn 10."""
    q = QuestionQueue(store, facts=facts, ranking=ranking)
    # A: two slot facts in conflict, pytest at 0.7 after one "acted", unittest at 0.5.
    a = facts.add("a1", "Tests use pytest", subject="tests", attribute="use", value="pytest")
    b = facts.add("a1", "Tests use unittest", subject="tests", attribute="use", value="unittest")
    facts.observe({a: "acted"})
    options = [
        {"label": "pytest", "acted": [a], "contradicted": [b]},
        {"label": "unittest", "acted": [b], "contradicted": [a]},
    ]
    text = Reconciler.conflict_question(facts.get(a), facts.get(b))
    conflict = q.propose(
        "a1", text, "disjunction", "reconciliation", [a, b], "disjunction", 9, options=options
    )
    # B: a free statement at 0.3, refused by the gate at turn 10, from the gate producer.
    weak = facts.add("a1", "The parser tests run nightly")
    facts.observe({weak: "contradicted"})
    gate = {"gate": {"gated": True, "mode": "refuse", "refused_keys": [weak]}}
    confirm = q.propose_from_gate("a1", gate, 10, REQUEST)
    # C: an evidence gap between two files, from a request at turn 7.
    gap = parser_gap()
    record = SimpleNamespace(agent_id="a1", key="res:7", references_json=json.dumps([gap]))
    assert q.propose_from_resolution(record, 7) == 1
    (referent,) = [c for c in q.candidates("a1") if c.kind == "referent"]
    return q, conflict, confirm, referent


def test_the_worked_example(store, facts):
    q, conflict, confirm, referent = worked_example(store, facts, "value")
    request, look = qv.request_stems(REQUEST), facts.get
    # A: use (1/2 + 1/2) / 2 = 0.5, closeness 1 - (0.6 - 0.4) = 0.8, exactness 1 -> 0.4
    assert qv.use(conflict, 10, request, look) == 0.5
    assert qv.closeness(conflict, look) == pytest.approx(0.8)
    assert qv.exactness(conflict, look) == 1.0
    assert qv.value(conflict, 10, request, look) == 0.4
    # B: use (1 + 2/3) / 2 = 5/6 (parser, test: the fact's words, not the request quoted in
    # the question), closeness 1 - (0.7 - 0.3) = 0.6, exactness 0.625 -> 0.3125
    assert qv.use(confirm, 10, request, look) == pytest.approx(5 / 6)
    assert qv.closeness(confirm, look) == pytest.approx(0.6)
    assert qv.exactness(confirm, look) == 0.625
    assert qv.value(confirm, 10, request, look) == 0.3125
    # C: use (1/4 + 1/2) / 2 = 0.375, closeness 1, exactness 1 -> 0.375
    assert qv.use(referent, 10, request, look) == 0.375
    assert qv.value(referent, 10, request, look) == 0.375
    asked = q.next_question("a1", 10, query_cues=REQUEST)
    assert asked.candidate_id == conflict.candidate_id
    # At 15 the referent (last used at 7) is past the VOI gate's 5 turns: B is next.
    assert q.next_question("a1", 15, query_cues=REQUEST).candidate_id == confirm.candidate_id


def test_the_seed_asks_the_most_recently_used_instead(store, facts):
    q, _conflict, confirm, _referent = worked_example(store, facts, "seed")
    assert q.next_question("a1", 10, query_cues=REQUEST).candidate_id == confirm.candidate_id


# ------------------------------------------------------- settled_by_request
def _labels(a, b):
    return cand([{"label": a, "acted": ["fa"]}, {"label": b, "acted": ["fb"]}])


@pytest.mark.parametrize(
    ("a", "b", "request_text", "settled"),
    [
        ("pytest", "unittest", "run the tests with PyTest.", True),
        ("pytest", "unittest", "port the unittest cases", True),
        ("pytest", "unittest", "pytest or unittest, which is faster?", False),  # both
        ("pytest", "unittest", "fix the failing tests", False),  # neither
        ("semantic versioning", "calendar versioning", "bump it with semantic versioning", True),
        ("semantic versioning", "calendar versioning", "bump it the semantic way", False),
        ("black", "Black", "run black", False),  # nothing tells the two apart
        ("py\u202etest\x1b[8m", "unittest", "add the tests", False),  # a word of a label is not it
        ("test", "pytest", "run pytest", True),  # whole words: "test" is not in "pytest"
    ],
)
def test_a_request_settles_a_disjunction_only_by_naming_one_label(a, b, request_text, settled):
    assert qv.settled_by_request(_labels(a, b), request_text) is settled
    assert qv.settled_by_request(_labels(b, a), [request_text, "x.py"]) is settled


def test_only_a_two_sided_disjunction_with_a_request_is_settled():
    request = "run the tests with pytest"
    yes_no = [{"label": "pytest"}, {"label": "no"}]
    assert not qv.settled_by_request(cand(yes_no, kind="confirmation"), request)
    assert not qv.settled_by_request(cand(yes_no, kind="referent"), request)
    assert not qv.settled_by_request(_labels("pytest", "unittest"), None)
    three = [{"label": "pytest"}, {"label": "unittest"}, {"label": "nose2"}]
    assert not qv.settled_by_request(cand(three), request)
