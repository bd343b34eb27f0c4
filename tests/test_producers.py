"""The producers that turn uncertainty into candidates: a confidence-gate refusal and evidence
gaps in reference resolution. (Disjunctions from the reconciler arrive with the memory layer;
until then the tests propose them directly, as that producer will.)"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from .conftest import disjunction

K = 5


def gate(keys, **overrides):
    g = {"applied": True, "gate_score": 0.3, "threshold": 0.6, "mode": "refuse", "gated": True}
    g.update(overrides)
    if keys is not None:
        g["refused_keys"] = keys
    return {"gate": g}


def record(refs, agent="a1", key="res:turn7"):
    return SimpleNamespace(agent_id=agent, key=key, references_json=json.dumps(refs))


def gap(start, end, candidates, question="Who is meant?", surface="them"):
    return {
        "surface": surface,
        "start": start,
        "end": end,
        "kind": "definite_reference",
        "status": "evidence_gap",
        "candidates": candidates,
        "question": question,
    }


# ------------------------------------------------------------------- gate
def test_gate_refusal_becomes_a_confirmation(qq, facts):
    key = facts.add("a1", "deploys go through make release")
    cand = qq.propose_from_gate("a1", gate([key, "fact:other"]), 3, "  run the deploy  ")
    assert (cand.kind, cand.ambiguity_signal, cand.source_module) == (
        "confirmation",
        "gate_refusal",
        "context_assembler.confidence_gate",
    )
    assert cand.target_keys == [key]
    assert cand.options == [
        {"label": "yes", "acted": [key], "contradicted": []},
        {"label": "no", "acted": [], "contradicted": [key]},
    ]
    assert "deploy" in cand.cue_tokens and "'run the deploy'" in cand.question_text
    # Metadata may come as an object carrying .metadata.
    again = qq.propose_from_gate("a1", SimpleNamespace(metadata=gate([key])), 4, "deploy")
    assert again.candidate_id == cand.candidate_id and again.last_seen_turn == 4


def test_two_refusals_under_one_query_stay_two(qq, facts):
    k1, k2 = facts.add("a1", "one"), facts.add("a1", "two")
    c1 = qq.propose_from_gate("a1", gate([k1]), 0, "deploy")
    c2 = qq.propose_from_gate("a1", gate([k2]), 0, "deploy")
    assert c1.candidate_id != c2.candidate_id


@pytest.mark.parametrize(
    "metadata",
    [
        {},
        {"gate": {"applied": False, "gated": False, "mode": "refuse"}},
        gate(["fact:x"], gated=False),
        gate(None),
        gate([]),
        gate(["fact:x"], mode="flag"),
        None,
        "garbage",
        {"gate": "garbage"},
        SimpleNamespace(metadata=None),
    ],
)
def test_gate_inputs_that_propose_nothing(qq, metadata):
    assert qq.propose_from_gate("a1", metadata, 0, "deploy") is None
    assert qq.candidates("a1") == []


def test_gate_topic_falls_back(qq):
    cand = qq.propose_from_gate("a1", gate(["fact:x"]), 0, "   ")
    assert "'this topic'" in cand.question_text


# ------------------------------------------------------------- resolution
def test_one_referent_question_per_gap(qq):
    rec = record(
        [
            gap(0, 3, ["Dana", "Priya", "dana"], question="Who is 'she'?"),
            {"surface": "it", "start": 9, "end": 11, "status": "resolved"},
        ]
    )
    assert qq.propose_from_resolution(rec, 7) == 1
    (cand,) = qq.candidates("a1")
    assert cand.question_text == "Who is 'she'?"
    assert (cand.kind, cand.ambiguity_signal, cand.source_module) == (
        "referent",
        "evidence_gap",
        "extraction.resolution",
    )
    assert cand.target_keys == ["res:turn7#ref:0:3"]
    assert cand.options == [
        {"label": "Dana", "acted": [], "contradicted": []},
        {"label": "Priya", "acted": [], "contradicted": []},
    ]
    res = qq.record_answer(cand, "priya", 8)
    assert (res.applied, res.option_index) == (True, 1)  # recorded, no evidence to apply


def test_two_gaps_give_two_questions(qq):
    rec = record(
        [gap(0, 3, ["a.py", "b.py"], question=None, surface="the parser"), gap(10, 18, ["x", "y"])]
    )
    assert qq.propose_from_resolution(rec, 0) == 2
    texts = sorted(c.question_text for c in qq.candidates("a1"))
    assert texts == ["Who is meant?", "Who or what does 'the parser' refer to?"]
    assert qq.propose_from_resolution(rec, 1) == 2  # re-observed: touched, not duplicated
    assert len(qq.candidates("a1")) == 2


def test_awkward_candidate_names_become_numbered_options(qq):
    rec = record([gap(0, 4, ["Next", "Later file"])])
    qq.propose_from_resolution(rec, 0)
    (cand,) = qq.candidates("a1")
    assert [o["label"] for o in cand.options] == ["option 1", "option 2"]


@pytest.mark.parametrize(
    "rec",
    [
        SimpleNamespace(agent_id="a1", key="r", references_json="{not json"),
        SimpleNamespace(agent_id="a1", key="r", references_json='{"a": 1}'),
        record([gap(0, 3, [])]),
        record([gap(0, 3, ["", "  "])]),
        record([gap(0, 3, ["x", "y"])], agent=""),
        object(),
        None,
    ],
)
def test_unusable_records_give_zero(qq, rec):
    assert qq.propose_from_resolution(rec, 0) == 0
    assert qq.candidates("a1") == []


# --------------------------------------------------- independence, end to end
def three_sources(qq, facts, turn, skip):
    made = []
    if skip != "disjunction":
        made.append(disjunction(qq, facts, turn=turn)[0])
    if skip != "gate":
        key = facts.add("a1", "the deploy uses make release")
        made.append(qq.propose_from_gate("a1", gate([key]), turn, "deploy"))
    if skip != "resolution":
        qq.propose_from_resolution(record([gap(0, 10, ["src/parser.py", "tools/parser.py"])]), turn)
        made.append(next(c for c in qq.candidates("a1") if c.kind == "referent"))
    return made


@pytest.mark.parametrize("skip", ["disjunction", "gate", "resolution"])
def test_each_producer_is_optional(qq, facts, skip):
    made = three_sources(qq, facts, 1, skip)
    assert len(made) == 2
    first = qq.next_question("a1", 1)
    assert first.candidate_id in {c.candidate_id for c in made}
    for turn in range(2, 1 + K):
        assert qq.next_question("a1", turn) is None
    keys = [k for c in made for k in c.target_keys]
    qq.note_use("a1", keys, 1 + K)
    second = qq.next_question("a1", 1 + K)
    assert {first.candidate_id, second.candidate_id} == {c.candidate_id for c in made}


def test_no_producers_no_question(qq):
    assert qq.next_question("a1", 0) is None


def test_end_to_end_gate_path(qq, facts):
    key = facts.add("a1", "the deploy uses make release")
    delivered = []
    for turn in range(K):
        qq.propose_from_gate("a1", gate([key]), turn, "deploy")
        qq.note_use("a1", [key], turn)
        got = qq.next_question("a1", turn, query_cues="please deploy to staging")
        if got:
            delivered.append(got)
    assert len(delivered) == 1
    assert qq.record_answer(delivered[0], "yes", K).applied
    assert facts.get(key).confidence > 0.5


def test_end_to_end_disjunction_path(qq, facts):
    cand, a, b = disjunction(qq, facts, turn=0)
    delivered = [q for t in range(K) if (q := qq.next_question("a1", t, "meetings with Dana"))]
    assert [q.candidate_id for q in delivered] == [cand.candidate_id]
    res = qq.record_answer(delivered[0], "2", K)
    assert res.applied and qq.get(cand.candidate_id).answer_option == 1
    assert facts.get(a).live and facts.get(b).live  # evidence only; nothing superseded
